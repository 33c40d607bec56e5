/**
 * Results and answers as plain data and Markdown, with no DOM: main.ts turns
 * these into elements; tests check them directly.
 */
import type { Answer, Citation, Hit, SearchResult } from "./api";

export interface Target {
  /** the file as the server stored it (absolute on the server's machine) */
  path: string;
  /** the same file relative to the vault, when it lies inside it */
  vaultPath: string | null;
  line: number;
  anchor: string;
}

export interface HitView {
  n: number;
  title: string;
  section: string;
  location: string;
  snippet: string;
  target: Target;
}

export type Segment = { kind: "text"; text: string } | { kind: "cite"; n: number; label: string; target: Target | null };

const SNIPPET_CHARS = 280;

function posix(p: string): string {
  return p.replace(/\\/g, "/");
}

/** `path` relative to the vault folder, or null when it lies outside it. */
export function vaultPathOf(path: string, vaultBase: string | null): string | null {
  if (!vaultBase) return null;
  const base = posix(vaultBase).replace(/\/+$/, "") + "/";
  const p = posix(path);
  return p.startsWith(base) ? p.slice(base.length) : null;
}

/** The shortest useful name for a file: vault-relative, else its last three parts. */
export function shownPath(path: string, vaultBase: string | null): string {
  const rel = vaultPathOf(path, vaultBase);
  if (rel !== null) return rel;
  const parts = posix(path).split("/").filter(Boolean);
  return parts.length > 3 ? "…/" + parts.slice(-3).join("/") : posix(path);
}

function target(c: { path: string; line_start: number; anchor: string }, vaultBase: string | null): Target {
  return { path: c.path, vaultPath: vaultPathOf(c.path, vaultBase), line: c.line_start, anchor: c.anchor };
}

export function hitView(hit: Hit, vaultBase: string | null): HitView {
  const snippet = (hit.snippet || hit.text).replace(/\s+/g, " ").trim();
  return {
    n: hit.rank,
    title: hit.title || shownPath(hit.path, vaultBase),
    section: hit.heading_path.join(" > "),
    location: `${shownPath(hit.path, vaultBase)}:${hit.line_start}-${hit.line_end}` + (hit.page !== null ? ` p.${hit.page}` : ""),
    snippet: snippet.length > SNIPPET_CHARS ? snippet.slice(0, SNIPPET_CHARS - 1) + "…" : snippet,
    target: target(hit, vaultBase),
  };
}

export function hitViews(result: SearchResult, vaultBase: string | null): HitView[] {
  return result.hits.map((h) => hitView(h, vaultBase));
}

/** Markdown-inert text (for one line of a list). */
export function inert(text: string): string {
  return text.replace(/([\\`*_[\]<#|])/g, "\\$1");
}

function link(label: string, t: Target): string {
  if (t.vaultPath === null) return `\`${label}\``;
  return `[${inert(label)}](${encodeURI(t.vaultPath)})`;
}

/** A result list as Markdown: one item per hit with its location link, section and snippet. */
export function hitsMarkdown(result: SearchResult, vaultBase: string | null): string {
  if (result.hits.length === 0) return result.message || `No passage for “${result.query}”.`;
  return hitViews(result, vaultBase)
    .map((v) => {
      const section = v.section ? ` · § ${inert(v.section)}` : "";
      return `${v.n}. ${link(v.location, v.target)}${section}\n   > ${inert(v.snippet)}`;
    })
    .join("\n");
}

/** An answer split into text and `[n]` citations that point at their passage. */
export function answerSegments(answer: Answer, vaultBase: string | null): Segment[] {
  const byN = new Map<number, Citation>();
  for (const c of [...answer.passages, ...answer.citations]) byN.set(c.n, c);
  const out: Segment[] = [];
  const re = /\[(\d+)\]/g;
  let last = 0;
  for (let m = re.exec(answer.answer); m !== null; m = re.exec(answer.answer)) {
    if (m.index > last) out.push({ kind: "text", text: answer.answer.slice(last, m.index) });
    const n = Number(m[1]);
    const c = byN.get(n);
    out.push({ kind: "cite", n, label: m[0], target: c ? target(c, vaultBase) : null });
    last = m.index + m[0].length;
  }
  if (last < answer.answer.length) out.push({ kind: "text", text: answer.answer.slice(last) });
  return out;
}

/** The numbered sources under an answer. */
export function sourceViews(answer: Answer, vaultBase: string | null): HitView[] {
  return answer.citations.map((c) => ({
    n: c.n,
    title: c.title || shownPath(c.path, vaultBase),
    section: c.heading_path.join(" > "),
    location: `${shownPath(c.path, vaultBase)}:${c.line_start}-${c.line_end}` + (c.page !== null ? ` p.${c.page}` : ""),
    snippet: "",
    target: target(c, vaultBase),
  }));
}
