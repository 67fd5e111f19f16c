/**
 * A worked example plugin for Termada: a notes store agents see as `notes.add_note` and
 * `notes.list_notes`. Speaks MCP over stdio through the SDK; keeps notes as JSON lines in
 * `$NOTES_DIR/notes.jsonl`. Run by the daemon as configured in README.md. Never writes to
 * stdout itself: stdout is the MCP connection.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

/** Longest note kept, in characters. */
const MAX_NOTE = 4000;
/** Most notes `list_notes` returns (the newest). */
const MAX_LISTED = 100;

const dir = Deno.env.get("NOTES_DIR");
if (dir === undefined || dir === "") {
  Deno.stderr.writeSync(new TextEncoder().encode("notes: set NOTES_DIR to a directory\n"));
  Deno.exit(2);
}
await Deno.mkdir(dir, { recursive: true });
const file = `${dir}/notes.jsonl`;

interface Note {
  id: number;
  text: string;
  at: string;
}

async function readNotes(): Promise<Note[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
  return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Note);
}

const note = z.object({ id: z.number().int(), text: z.string(), at: z.string() });
const server = new McpServer({ name: "notes", version: "1.0.0" });

server.registerTool("add_note", {
  description: "Saves a short note; returns its id and how many notes there are",
  inputSchema: { text: z.string().min(1).max(MAX_NOTE) },
  outputSchema: { id: z.number().int(), count: z.number().int() },
}, async ({ text }: { text: string }) => {
  const notes = await readNotes();
  const entry: Note = { id: (notes.at(-1)?.id ?? 0) + 1, text, at: new Date().toISOString() };
  await Deno.writeTextFile(file, JSON.stringify(entry) + "\n", { append: true });
  const out = { id: entry.id, count: notes.length + 1 };
  return { content: [{ type: "text", text: `Saved note ${entry.id}` }], structuredContent: out };
});

server.registerTool("list_notes", {
  description: `Lists the newest notes (at most ${MAX_LISTED})`,
  inputSchema: {},
  outputSchema: { notes: z.array(note), total: z.number().int() },
}, async () => {
  const notes = await readNotes();
  const out = { notes: notes.slice(-MAX_LISTED), total: notes.length };
  const text = out.notes.map((n) => `${n.id}. ${n.text}`).join("\n") || "No notes yet";
  return { content: [{ type: "text", text }], structuredContent: out };
});

await server.connect(new StdioServerTransport());
