// The plugin's Obsidian-free logic (API client, streaming, rendering, code blocks,
// re-index queue) against a real `clawkb serve` on loopback.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { clawkbBin, startServer, TOKEN } from "./server.mjs";

const require = createRequire(import.meta.url);
const { ApiError, ClawkbClient, CLIENT_HEADER } = require("../out/core/api.js");
const { parseBlock } = require("../out/core/codeblock.js");
const { ReindexQueue } = require("../out/core/reindex.js");
const render = require("../out/core/render.js");
const { SseParser } = require("../out/core/sse.js");

test("code block: query lines, options, one-line errors", () => {
  assert.deepEqual(parseBlock("DDR 走线阻抗\nlimit: 3\npath: lx-rk3568/*\n"), {
    ok: true,
    spec: { query: "DDR 走线阻抗", limit: 3, path: ["lx-rk3568/*"], mode: null, ask: false },
  });
  const two = parseBlock("How is the TJA1051\n  S pin wired?\nask: yes\nmode: lexical");
  assert.equal(two.ok && two.spec.query, "How is the TJA1051 S pin wired?");
  assert.equal(two.ok && two.spec.ask && two.spec.mode, "lexical");
  assert.deepEqual(parseBlock("x\nlimit: 0"), { ok: false, error: "line 2: limit must be a whole number from 1 to 50, not “0”" });
  assert.match(parseBlock("x\nmode: fuzzy").error, /^line 2: mode must be one of/);
  assert.match(parseBlock("limit: 2\n\n").error, /no query/);
});

test("SSE parser: events split across chunks, CRLF, comments", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed('event: token\ndata: {"te'), []);
  assert.deepEqual(p.feed('xt": "a"}\n: keep-alive\n\n'), [{ event: "token", data: '{"text": "a"}' }]);
  const q = new SseParser();
  const got = [...q.feed('event: token\r\ndata: {"text": "b"}\r\n\r\nevent: done\r\n'), ...q.feed("data: {}\r\n\r\n")];
  assert.deepEqual(got, [
    { event: "token", data: '{"text": "b"}' },
    { event: "done", data: "{}" },
  ]);
});

test("paths: vault-relative inside the vault, shortened outside", () => {
  assert.equal(render.vaultPathOf("/v/notes/a.md", "/v/notes"), "a.md");
  assert.equal(render.vaultPathOf("/v/notesX/a.md", "/v/notes"), null);
  assert.equal(render.shownPath("/srv/kb/docs/board/ddr.md", "/v/notes"), "…/docs/board/ddr.md");
});

test("the client sends JSON, the bearer token and the client header", async () => {
  const seen = [];
  const echo = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ path: "/x", report: {} }));
    });
  });
  await new Promise((r) => echo.listen(0, "127.0.0.1", r));
  try {
    const c = new ClawkbClient({ serverUrl: `http://127.0.0.1:${echo.address().port}/`, token: "t0ken-123" });
    await c.index("notes/a.md");
    const [req] = seen;
    assert.equal(req.method, "POST");
    assert.equal(req.url, "/api/v1/index");
    assert.equal(req.headers["content-type"], "application/json");
    assert.equal(req.headers.authorization, "Bearer t0ken-123");
    assert.equal(req.headers[CLIENT_HEADER.toLowerCase()], "obsidian");
    assert.deepEqual(JSON.parse(req.body), { path: "notes/a.md" });
  } finally {
    echo.close();
  }
});

test("an unreachable server is one clear error", async () => {
  const c = new ClawkbClient({ serverUrl: "http://127.0.0.1:9", token: "" });
  await assert.rejects(c.search("x"), (e) => e instanceof ApiError && e.code === "unreachable" && /cannot reach the clawkb server/.test(e.message));
});

describe("against a real clawkb serve", { skip: !clawkbBin() && "no clawkb (run make venv)", timeout: 240000 }, () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new ClawkbClient({ serverUrl: server.url, token: TOKEN });
  });
  after(async () => {
    await server?.stop();
  });

  test("search renders hits with vault paths, lines and sections", async () => {
    const res = await client.search("DDR 走线阻抗", { limit: 3 });
    assert.ok(res.hits.length > 0);
    const [top] = render.hitViews(res, server.vault);
    assert.match(top.location, /^lx-rk3568\/ddr-layout\.md:\d+-\d+$/);
    assert.equal(top.section, "DDR4 布线规则 > 阻抗控制");
    assert.equal(top.target.vaultPath, "lx-rk3568/ddr-layout.md");
    assert.ok(top.target.line >= 1);
    const md = render.hitsMarkdown(res, server.vault);
    assert.match(md.split("\n")[0], /^1\. \[lx-rk3568\/ddr-layout\.md:\d+-\d+\]\(lx-rk3568\/ddr-layout\.md\) · § DDR4 布线规则 > 阻抗控制$/);
    const only = await client.search("impedance", { path: ["*tja1051*"] });
    assert.ok(only.hits.every((h) => h.path.endsWith("tja1051.md")));
  });

  test("a wrong token is a clear 401", async () => {
    const bad = new ClawkbClient({ serverUrl: server.url, token: "wrong-token-xyz" });
    await assert.rejects(bad.search("ddr"), (e) => e instanceof ApiError && e.status === 401 && e.code === "unauthorized" && /check the token/.test(e.message));
  });

  test("ask streams tokens, then the answer with clickable citations", async () => {
    const tokens = [];
    const answer = await client.ask("DDR 差分走线阻抗要求是多少？", (t) => tokens.push(t));
    assert.ok(tokens.length >= 1);
    assert.match(tokens.join(""), /100Ω/); // the streamed text carries the answer
    assert.match(answer.answer, /100Ω/);
    assert.equal(answer.abstained, false);
    const segs = render.answerSegments(answer, server.vault);
    const cites = segs.filter((s) => s.kind === "cite");
    assert.ok(cites.length > 0);
    assert.equal(cites[0].target.vaultPath, "lx-rk3568/ddr-layout.md");
    assert.equal(segs.map((s) => (s.kind === "text" ? s.text : s.label)).join(""), answer.answer);
    const sources = render.sourceViews(answer, server.vault);
    assert.ok(sources[0].location.startsWith("lx-rk3568/ddr-layout.md:"));
  });

  test("a code block runs its search", async () => {
    const parsed = parseBlock("GPIOA_MODER reset value\nlimit: 2");
    assert.ok(parsed.ok);
    const res = await client.search(parsed.spec.query, { limit: parsed.spec.limit, path: parsed.spec.path });
    assert.ok(res.hits.length <= 2);
    assert.equal(render.hitViews(res, server.vault)[0].target.vaultPath, "stm32f401re/registers.md");
  });

  test("vault changes are re-indexed through the API, debounced", async () => {
    const done = [];
    const calls = [];
    const queue = new ReindexQueue(
      (p) => {
        calls.push(p);
        return client.index(p);
      },
      50,
      "",
      (r) => done.push(r),
    );
    const note = path.join(server.vault, "drafts", "flux-capacitor.md");
    writeFileSync(note, "# Flux\n\nThe quokkatronic flux capacitor needs 1.21 GW.\n");
    queue.push("create", "drafts/flux-capacitor.md");
    queue.push("modify", "drafts/flux-capacitor.md");
    queue.push("modify", "drafts/flux-capacitor.md");
    queue.push("modify", ".obsidian/workspace.json"); // settings: never sent
    await new Promise((r) => setTimeout(r, 300)); // the quiet period passes; the flush runs
    await queue.flush();
    assert.deepEqual(calls, ["drafts/flux-capacitor.md"]);
    assert.ok(done[0][0].ok, JSON.stringify(done));
    let res = await client.search("quokkatronic");
    assert.equal(render.hitViews(res, server.vault)[0].target.vaultPath, "drafts/flux-capacitor.md");

    rmSync(note);
    queue.push("delete", "drafts/flux-capacitor.md");
    const results = await queue.flush();
    assert.deepEqual(results.map((r) => [r.path, r.ok]), [["drafts", true]]);
    res = await client.search("quokkatronic");
    assert.equal(res.hits.length, 0);

    queue.push("modify", "../outside.md"); // never sent: not a vault note
    queue.push("modify", "drafts/never-written.md");
    const missing = await queue.flush();
    assert.equal(missing.length, 1);
    assert.equal(missing[0].ok, false);
    assert.equal(missing[0].message, "drafts/never-written.md: no such file or folder");
  });
});
