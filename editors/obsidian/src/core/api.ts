/**
 * The clawkb HTTP API (docs/api.md) as the plugin uses it. Every request sends
 * JSON, the bearer token when one is set, and `X-Clawkb-Client: obsidian` (the
 * server may require a custom header on state-changing requests).
 */
import { request, type Reply } from "./transport";
import { SseParser } from "./sse";

export const CLIENT_HEADER = "X-Clawkb-Client";
export const CLIENT_NAME = "obsidian";

/** Where a passage is: what hits and citations share. */
export interface Located {
  anchor: string;
  path: string;
  line_start: number;
  line_end: number;
  page: number | null;
  heading_path: string[];
  title: string;
}

export interface Hit extends Located {
  rank: number;
  score: number;
  snippet: string;
  text: string;
}

export interface SearchResult {
  query: string;
  took_ms: number;
  count: number;
  message: string;
  warnings: string[];
  hits: Hit[];
}

export interface Citation extends Located {
  n: number;
}

export interface Answer {
  question: string;
  mode: string;
  answer: string;
  abstained: boolean;
  citations: Citation[];
  passages: Citation[];
  warnings: string[];
}

export interface SearchOptions {
  limit?: number;
  path?: string[];
  mode?: string;
}

/** A failed call: `code` is the API's stable error code (docs/api.md), `message` its one line. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export interface ClientSettings {
  serverUrl: string;
  token: string;
}

export class ClawkbClient {
  constructor(private readonly settings: ClientSettings) {}

  private url(path: string, params?: URLSearchParams): string {
    const base = this.settings.serverUrl.replace(/\/+$/, "");
    const query = params && [...params.keys()].length > 0 ? `?${params.toString()}` : "";
    return `${base}${path}${query}`;
  }

  headers(json: boolean): Record<string, string> {
    const h: Record<string, string> = { Accept: "application/json", [CLIENT_HEADER]: CLIENT_NAME };
    if (json) h["Content-Type"] = "application/json";
    if (this.settings.token) h.Authorization = `Bearer ${this.settings.token}`;
    return h;
  }

  private async call<T>(method: string, path: string, opts: { params?: URLSearchParams; body?: unknown } = {}): Promise<T> {
    let reply: Reply;
    try {
      reply = await request(this.url(path, opts.params), {
        method,
        headers: this.headers(opts.body !== undefined),
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      });
    } catch (err) {
      throw new ApiError(0, "unreachable", `cannot reach the clawkb server at ${this.settings.serverUrl}: ${(err as Error).message}`);
    }
    return parseReply<T>(reply);
  }

  search(q: string, opts: SearchOptions = {}): Promise<SearchResult> {
    const params = new URLSearchParams({ q });
    if (opts.limit !== undefined) params.set("limit", String(opts.limit));
    if (opts.mode) params.set("mode", opts.mode);
    for (const p of opts.path ?? []) params.append("path", p);
    return this.call<SearchResult>("GET", "/api/v1/search", { params });
  }

  status(): Promise<Record<string, unknown>> {
    return this.call("GET", "/api/v1/status");
  }

  /** Index a file or folder inside the served roots (relative to the first root). */
  index(path: string): Promise<{ path: string; report: Record<string, unknown> }> {
    return this.call("POST", "/api/v1/index", { body: { path } });
  }

  /**
   * Ask with a streamed answer: `onToken` gets each piece of text as it arrives;
   * the promise resolves with the whole answer object (the `sources` event).
   */
  async ask(question: string, onToken: (text: string) => void, opts: { limit?: number } = {}): Promise<Answer> {
    const parser = new SseParser();
    let answer: Answer | undefined;
    let failure: ApiError | undefined;
    const handle = (chunk: string) => {
      for (const ev of parser.feed(chunk)) {
        if (ev.event === "token") onToken((JSON.parse(ev.data) as { text: string }).text);
        else if (ev.event === "sources") answer = JSON.parse(ev.data) as Answer;
        else if (ev.event === "error") {
          const e = JSON.parse(ev.data) as { code?: string; message?: string };
          failure = new ApiError(200, e.code ?? "error", e.message ?? "the answer failed");
        }
      }
    };
    let reply: Reply;
    try {
      reply = await request(this.url("/api/v1/ask"), {
        method: "POST",
        headers: { ...this.headers(true), Accept: "text/event-stream" },
        body: JSON.stringify({ question, stream: true, limit: opts.limit ?? 8 }),
        onChunk: (c) => {
          if (!failure) handle(c);
        },
      });
    } catch (err) {
      throw new ApiError(0, "unreachable", `cannot reach the clawkb server at ${this.settings.serverUrl}: ${(err as Error).message}`);
    }
    if (reply.status !== 200) parseReply(reply);
    if (failure) throw failure;
    if (!answer) throw new ApiError(reply.status, "bad_stream", "the answer stream ended without its sources");
    return answer;
  }
}

function parseReply<T>(reply: Reply): T {
  let body: unknown;
  try {
    body = reply.text ? JSON.parse(reply.text) : {};
  } catch {
    throw new ApiError(reply.status, "bad_response", `the server answered ${reply.status} with something that is not JSON`);
  }
  if (reply.status >= 200 && reply.status < 300) return body as T;
  const e = body as { code?: string; message?: string };
  const hint = reply.status === 401 ? " (check the token in the plugin settings)" : "";
  throw new ApiError(reply.status, e.code ?? "error", (e.message ?? `HTTP ${reply.status}`) + hint);
}
