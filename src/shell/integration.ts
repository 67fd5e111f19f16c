/**
 * Shell integration scripts and launch commands. Each supported shell prints three invisible
 * markers carrying the session nonce (see markers.ts): `start` when it accepts a command line
 * (bash PS0, zsh preexec, sh: a function called on the typed line), `end` with `$?` and `$PWD`
 * before every prompt (bash PROMPT_COMMAND, zsh precmd, sh PS1 expansion — so it still arrives
 * after Ctrl-C abandons a line), and `prompt` inside PS1 (the shell is ready for input).
 * The nonce lives in an unexported shell variable; program output cannot forge it.
 */
import { hasControlChars, quoteWord, type ShellKind } from "./quote.ts";

export interface ShellLaunch {
  argv: string[];
  /** Extra environment for the shell process (merged over the caller's base env). */
  env: Record<string, string>;
  /** Files the caller must write (mode 0600) before spawning. */
  files: { path: string; content: string }[];
}

export interface LaunchOptions {
  nonce: string;
  /** A private directory (0700) for this session's generated files. */
  dir: string;
  /** Also source the user's own rc file (~/.bashrc, ~/.zshrc) before ours. */
  userRc?: boolean;
}

const BASH_RC = `# Termada shell integration (bash). Generated per session; do not edit.
__tm_n=$TERMADA_NONCE
__tm_d=$TERMADA_DIR
unset TERMADA_DIR
unset TERMADA_NONCE
if [ -n "\${TERMADA_USER_RC-}" ]; then unset TERMADA_USER_RC; [ -r ~/.bashrc ] && . ~/.bashrc; fi
unset HISTFILE
set +H
bind 'set enable-bracketed-paste off' 2>/dev/null
__tm_drop() { local i=0 x; while ((i++ < 256)) && builtin read -r -t 0; do builtin read -r -t 0.05 x || break; done; }
__tm_end() { local s=$?; [[ -e $__tm_d/discard ]] && __tm_drop; builtin printf '\\033]7717;%s;D;%s;%s\\007' "$__tm_n" "$s" "$PWD"; return $s; }
PROMPT_COMMAND='__tm_end 2>/dev/null'
PS0=$'\\e]7717;'"$__tm_n"$';C\\a'
PS1='\\[\\e]7717;'"$__tm_n"';P\\a\\]\\W\\$ '
PS2='> '
`;

const ZSH_RC = `# Termada shell integration (zsh). Generated per session; do not edit.
__tm_n=$TERMADA_NONCE
__tm_d=$TERMADA_DIR
unset TERMADA_DIR
unset TERMADA_NONCE
if [[ -n \${TERMADA_USER_RC-} ]]; then unset TERMADA_USER_RC; [[ -r ~/.zshrc ]] && ZDOTDIR=$HOME . ~/.zshrc; fi
unset HISTFILE zle_bracketed_paste
__tm_drop() { local i=0 x; while (( i++ < 65536 )) && read -t 0 -k 1 x; do :; done }
__tm_end() { local s=$?; [[ -e $__tm_d/discard ]] && __tm_drop 2>/dev/null; builtin printf '\\033]7717;%s;D;%s;%s\\007' "$__tm_n" "$s" "$PWD"; return $s }
__tm_start() { builtin printf '\\033]7717;%s;C\\007' "$__tm_n" }
precmd_functions=(__tm_end $precmd_functions)
preexec_functions+=(__tm_start)
setopt PROMPT_PERCENT NO_PROMPT_SP NO_PROMPT_CR
PS1=$'%{\\e]7717;'"$__tm_n"$';P\\a%}%1~%# '
PS2='> '
`;

const SH_RC = `# Termada shell integration (POSIX sh). Generated per session; do not edit.
__tm_n=$TERMADA_NONCE
unset TERMADA_NONCE TERMADA_DIR
__tm_c() { printf '\\033]7717;%s;C\\007' "$__tm_n"; }
__tm_p() { printf '\\033]7717;%s;D;%s;%s\\007\\033]7717;%s;P\\007' "$__tm_n" "$1" "$PWD" "$__tm_n"; }
PS1='$(__tm_p $?)$ '
PS2='> '
`;

/** How to start a shell of `kind` with the integration loaded. */
export function shellLaunch(kind: ShellKind, options: LaunchOptions): ShellLaunch {
  // TERMADA_DIR: where the daemon puts the `discard` flag (type-ahead to drop before a prompt).
  const env: Record<string, string> = { TERMADA_NONCE: options.nonce, TERMADA_DIR: options.dir };
  if (options.userRc) env.TERMADA_USER_RC = "1";
  switch (kind) {
    case "bash": {
      const rc = `${options.dir}/bashrc`;
      return {
        argv: ["bash", "--noprofile", "--rcfile", rc, "-i"],
        env,
        files: [{ path: rc, content: BASH_RC }],
      };
    }
    case "zsh": {
      return {
        argv: ["zsh", "-i"],
        env: { ...env, ZDOTDIR: options.dir },
        files: [{ path: `${options.dir}/.zshrc`, content: ZSH_RC }],
      };
    }
    case "sh": {
      const rc = `${options.dir}/shrc`;
      return {
        argv: ["sh", "-i"],
        env: { ...env, ENV: rc },
        files: [{ path: rc, content: SH_RC }],
      };
    }
  }
}

/** Command lines longer than this are staged in a file and sourced (readline is slow on huge lines; a canonical-mode tty cuts lines at 4095 bytes). */
export const STAGE_THRESHOLD = 2048;

export interface TypedCommand {
  /** The bytes to type into the shell, Enter included. */
  line: string;
  /** When set, the caller writes this script to `stagePath` first and removes it afterwards. */
  staged?: string;
}

/**
 * The line to type for `script` (shell source). Multi-line or control-character scripts go
 * through `eval $'…'` in bash/zsh; huge ones, and any with control characters in POSIX sh,
 * are staged in `stagePath` and sourced, so cd/export still persist.
 */
export function typedCommand(
  kind: ShellKind,
  script: string,
  stagePath: string,
  options: { stage?: boolean } = {},
): TypedCommand {
  let line: string | undefined;
  if (kind === "sh") {
    if (!hasControlChars(script)) line = `__tm_c;eval ${quoteWord(script)}`;
  } else {
    line = hasControlChars(script) ? `eval ${quoteWord(script)}` : script;
  }
  // `stage`: the script holds values (vault secrets) that must not be typed, where the
  // terminal would echo them and the shell's line editor would hold them.
  if (line !== undefined && line.length <= STAGE_THRESHOLD && options.stage !== true) {
    return { line: line + "\r" };
  }
  // Read whole, then run: a sourced file is read as it runs (dash reads it line by line), so a
  // command could append to its own staged file and have the appended text run unchecked.
  // bash and zsh read it with a builtin ($(<file)); POSIX sh has none, so `cat` reads it.
  const path = quoteWord(stagePath, { allowAnsiC: false });
  const source = kind === "sh" ? `__tm_c;eval "$(cat ${path})"` : `eval "$(<${path})"`;
  return { line: source + "\r", staged: script + "\n" };
}
