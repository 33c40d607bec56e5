/**
 * HTTP over Node's http/https modules. Obsidian desktop runs plugins with Node
 * available, and Node requests are not subject to the browser's CORS rules, so
 * the same code serves the plugin and the tests (which talk to a real server).
 */
import * as http from "node:http";
import * as https from "node:https";

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface RequestOptions {
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** called with each decoded chunk of the response body as it arrives (streams) */
  onChunk?: (text: string) => void;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export function request(url: string, opts: RequestOptions): Promise<Reply> {
  const target = new URL(url);
  const lib = target.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(
      target,
      { method: opts.method, headers: opts.headers, timeout: opts.timeoutMs ?? 60000, signal: opts.signal },
      (res) => {
        res.setEncoding("utf8");
        let text = "";
        res.on("data", (chunk: string) => {
          text += chunk;
          opts.onChunk?.(chunk);
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer from ${target.origin} within ${opts.timeoutMs ?? 60000} ms`)));
    req.on("error", reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}
