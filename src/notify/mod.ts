/**
 * Notifications: telling a person, outside the terminal, that Termada needs them — an approval
 * waiting, a job waiting for input, a job that failed, a stop-all. This folder owns the
 * `notifications:` config section's schema, the mapping from bus events to notifications, the
 * dispatcher (bounded queues, coalescing, rate limits, retries with back-off) and two sinks:
 * desktop (`notify-send`) and outbound-only Telegram (`sendMessage`). It does not own the bus,
 * the redactor, the vault or the root config: the daemon subscribes it to the bus, gives it its
 * redactor as a `(text) => string` and resolves a vault-held token through a callback. It never
 * sends output, and never receives anything from Telegram but the answer to its own request.
 */
export {
  FAILURE_STATUSES,
  type FailureStatus,
  NOTIFICATION_KINDS,
  type NotificationKind,
  NotificationsConfig,
  NOTIFY_LIMITS,
} from "./schema.ts";
export { type Message, type Notification, type Redact, renderMessage } from "./message.ts";
export { DeliveryError, type Sink } from "./sink.ts";
export { Notifier, type NotifierOptions, type SinkStats } from "./notifier.ts";
export { loadBotToken, TELEGRAM_TEXT_MAX, type TelegramOptions, TelegramSink } from "./telegram.ts";
export { type DesktopOptions, DesktopSink, findOnPath, type Urgency } from "./desktop.ts";
export {
  type BusEventLike,
  type BusLike,
  type EventMapOptions,
  INPUT_NEEDED_EVENT,
  notificationFor,
  notificationsFromBus,
  type NotifyTarget,
} from "./events.ts";
export { createNotifier, type CreateNotifierOptions } from "./create.ts";
export type { Timers } from "./_timers.ts";
