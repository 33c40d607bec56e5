/**
 * The ```clawkb code block: a query plus options, one per line.
 *
 *     ```clawkb
 *     DDR 走线阻抗
 *     limit: 3
 *     path: lx-rk3568/*
 *     ```
 *
 * Lines `limit:`, `path:` (repeatable), `mode:` and `ask:` (yes/no: a cited answer
 * instead of a result list) are options; every other non-empty line is the query.
 */
export interface BlockSpec {
  query: string;
  limit: number;
  path: string[];
  mode: string | null;
  ask: boolean;
}

export type Parsed = { ok: true; spec: BlockSpec } | { ok: false; error: string };

const OPTION = /^(limit|path|mode|ask)\s*:\s*(.*)$/i;
const MODES = new Set(["auto", "lexical", "dense", "hybrid"]);
export const DEFAULT_LIMIT = 5;
export const MAX_LIMIT = 50;

export function parseBlock(source: string): Parsed {
  const spec: BlockSpec = { query: "", limit: DEFAULT_LIMIT, path: [], mode: null, ask: false };
  const words: string[] = [];
  const lines = source.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith("//")) continue;
    const m = OPTION.exec(line);
    if (!m) {
      words.push(line);
      continue;
    }
    const key = m[1].toLowerCase();
    const value = m[2].trim();
    if (key === "limit") {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT) {
        return { ok: false, error: `line ${i + 1}: limit must be a whole number from 1 to ${MAX_LIMIT}, not “${value}”` };
      }
      spec.limit = n;
    } else if (key === "path") {
      if (value) spec.path.push(value);
    } else if (key === "mode") {
      if (!MODES.has(value)) return { ok: false, error: `line ${i + 1}: mode must be one of ${[...MODES].join(", ")}, not “${value}”` };
      spec.mode = value;
    } else {
      const v = value.toLowerCase();
      if (!["yes", "no", "true", "false"].includes(v)) return { ok: false, error: `line ${i + 1}: ask must be yes or no, not “${value}”` };
      spec.ask = v === "yes" || v === "true";
    }
  }
  spec.query = words.join(" ").replace(/\s+/g, " ").trim();
  if (!spec.query) return { ok: false, error: "the block has no query: write what to search for on its first line" };
  return { ok: true, spec };
}
