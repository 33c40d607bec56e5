// clawkb web page: search as you type, source viewer, streamed answers, status.
// Plain DOM, no build step, no outside requests. Text is only ever set with
// textContent (never innerHTML), so a document's markup shows as text.
"use strict";

const I18N = {
  en: {
    tab_search: "Search", tab_ask: "Ask", tab_status: "Status", filters: "Filters",
    search_placeholder: "Search notes, datasheets, code…", f_path: "Path", f_type: "Type",
    f_board: "Board", f_mode: "Mode", f_since: "Since", f_explain: "Explain scores",
    ask_placeholder: "Ask a question; the answer cites its sources [n]", ask_button: "Ask",
    watch: "Watch", runs: "Last runs", r_started: "Started", r_status: "Status",
    r_counts: "Counts", r_errors: "Errors", prev: "◀ previous", next: "next ▶",
    token_prompt: "This server needs an access token.", hits: (n, ms) => `${n} result${n === 1 ? "" : "s"} · ${ms} ms`,
    none: "No match.", no_match: "Nothing in the knowledge base looks relevant to this query.",
    sources: "Sources", nearest: "Nearest passages", asking: "Thinking…",
    documents: "Documents", chunks: "Chunks", vectors: "Vectors", segments: "Segments",
    memories: "Memories", watch_off: "Not watching (start with --watch).",
    watch_on: (s) => `Watching ${s.roots.join(", ")} · ${s.runs} runs · ${s.pending} pending` +
      (s.running ? " · indexing now" : ""),
    explain: "Score details", lang: "中文", error: "Error",
    selfcheck: "Self-check", self_run: "Check this knowledge base", self_busy: "Running queries…",
    self_kind: (k) => ({ section: "section title", identifier: "identifier", zh2en: "Chinese → English page",
      en2zh: "English → Chinese page" })[k] || k,
    self_note: (s) => `hit@${s.k}: share of queries whose answer is in the top ${s.k} · ${s.seconds} s`,
    tab_hits: "Hit test", tab_golden: "Golden", tab_upload: "Upload", retry: "Retry",
    ask_hint: "Enter to ask · Shift+Enter for a new line · follow-up questions keep the conversation",
    new_chat: "New conversation", searched: "searched for", hits_placeholder: "Query to test",
    h_fusion: "Fusion", h_minconf: "Min confidence", h_run: "Test", h_save: "Save to config",
    saved: (f) => `Saved to ${f}`, score: "score", add_golden: "+ golden", added_golden: "Added to golden queries",
    g_check: "Run check", g_query: "Query", g_expect: "Expected", g_result: "Result",
    g_empty: "No golden queries yet: add one from a hit in Hit test.", remove: "remove",
    g_summary: (r) => `hit@${r.k} ${(r.hit_at_k * 100).toFixed(0)}% (${r.hits}/${r.total}) · threshold ${r.threshold * 100}% · ${r.passed ? "passed" : "FAILED"}`,
    g_rank: (r) => r.passed ? `✓ rank ${r.rank}` : (r.rank ? `✗ rank ${r.rank}` : "✗ not found") + (r.top_paths.length ? " · got " + r.top_paths.map(rel).join(", ") : ""),
    drop: "Drop files here, or click to choose", inbox: (p) => `Files go to ${p} and are indexed at once.`,
    no_inbox: "Uploads are off: start the server with --inbox DIR (or server.inbox).",
    uploading: (p) => `uploading ${p}%`, indexing: "indexing…",
    indexed: (r) => `indexed: +${r.added} ~${r.updated} ✗${r.failed} · ${r.chunks_added} chunks`,
    nomatch_q: (q) => `No match for “${q}”. Try fewer or other words, another language, or clear the filters.`,
    offline: "The server cannot be reached — results below are cleared until it answers again.",
    bad_token: "That token was refused. Try again.",
    kb_path: "Knowledge base", roots: "Served folders", mode: "Search mode", model: "Models", pending: "Vectors pending",
    legend: "Documents: indexed files · Chunks: searchable passages · Vectors: chunks with an embedding (dense search) · Vectors pending: chunks still waiting for one (— when the KB has none: run clawkb embed) · Segments: index files on disk · Memories: agent memories",
  },
  zh: {
    tab_search: "搜索", tab_ask: "问答", tab_status: "状态", filters: "筛选",
    search_placeholder: "搜索笔记、数据手册、代码…", f_path: "路径", f_type: "类型",
    f_board: "板卡", f_mode: "模式", f_since: "起始时间", f_explain: "显示评分细节",
    ask_placeholder: "输入问题，回答会引用来源 [n]", ask_button: "提问",
    watch: "监视", runs: "最近的索引", r_started: "开始", r_status: "状态",
    r_counts: "计数", r_errors: "错误", prev: "◀ 上一段", next: "下一段 ▶",
    token_prompt: "此服务器需要访问令牌。", hits: (n, ms) => `${n} 条结果 · ${ms} 毫秒`,
    none: "没有匹配。", no_match: "知识库中没有与此查询相关的内容。", sources: "来源", nearest: "最相近的段落", asking: "思考中…",
    documents: "文档", chunks: "分块", vectors: "向量", segments: "索引段",
    memories: "记忆", watch_off: "未监视（用 --watch 启动）。",
    watch_on: (s) => `正在监视 ${s.roots.join("、")} · ${s.runs} 次索引 · ${s.pending} 个待处理` +
      (s.running ? " · 正在索引" : ""),
    explain: "评分细节", lang: "English", error: "错误",
    selfcheck: "自检", self_run: "检查此知识库", self_busy: "正在查询…",
    self_kind: (k) => ({ section: "章节标题", identifier: "标识符", zh2en: "中文 → 英文页面",
      en2zh: "英文 → 中文页面" })[k] || k,
    self_note: (s) => `hit@${s.k}：答案在前 ${s.k} 条中的查询比例 · ${s.seconds} 秒`,
    tab_hits: "命中测试", tab_golden: "黄金查询", tab_upload: "上传", retry: "重试",
    ask_hint: "Enter 提问 · Shift+Enter 换行 · 可以接着追问",
    new_chat: "新对话", searched: "检索", hits_placeholder: "要测试的查询",
    h_fusion: "融合", h_minconf: "最低置信度", h_run: "测试", h_save: "保存到配置",
    saved: (f) => `已保存到 ${f}`, score: "得分", add_golden: "+ 黄金查询", added_golden: "已加入黄金查询",
    g_check: "运行检查", g_query: "查询", g_expect: "期望", g_result: "结果",
    g_empty: "还没有黄金查询：在“命中测试”里从命中结果添加。", remove: "删除",
    g_summary: (r) => `hit@${r.k} ${(r.hit_at_k * 100).toFixed(0)}%（${r.hits}/${r.total}）· 阈值 ${r.threshold * 100}% · ${r.passed ? "通过" : "未通过"}`,
    g_rank: (r) => r.passed ? `✓ 第 ${r.rank} 名` : (r.rank ? `✗ 第 ${r.rank} 名` : "✗ 未找到") + (r.top_paths.length ? " · 实际 " + r.top_paths.map(rel).join("、") : ""),
    drop: "把文件拖到这里，或点击选择", inbox: (p) => `文件保存到 ${p} 并立即索引。`,
    no_inbox: "上传未开启：用 --inbox DIR（或 server.inbox）启动服务器。",
    uploading: (p) => `上传中 ${p}%`, indexing: "索引中…",
    indexed: (r) => `已索引：+${r.added} ~${r.updated} ✗${r.failed} · ${r.chunks_added} 个分块`,
    nomatch_q: (q) => `没有与“${q}”匹配的结果。试试更少或别的词、换一种语言，或清除筛选。`,
    offline: "无法连接服务器——在它恢复之前，下面的结果已清空。",
    bad_token: "令牌不正确，请重试。",
    kb_path: "知识库", roots: "服务的文件夹", mode: "检索模式", model: "模型", pending: "待生成向量",
    legend: "文档：已索引的文件 · 分块：可检索的段落 · 向量：已有嵌入的分块（语义检索）· 待生成向量：还在等待嵌入的分块（— 表示尚未生成：运行 clawkb embed）· 索引段：磁盘上的索引文件 · 记忆：智能体记忆",
  },
};

const $ = (sel) => document.querySelector(sel);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
};

let lang = localStorage.getItem("clawkb.lang") ||
  ((navigator.languages || [navigator.language || "en"]).some((l) => /^zh/i.test(l)) ? "zh" : "en");
const t = (key, ...args) => {
  const v = I18N[lang][key];
  return typeof v === "function" ? v(...args) : v;
};

function applyLang() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((e) => { e.textContent = t(e.dataset.i18n); });
  document.querySelectorAll("[data-i18n-placeholder]").forEach((e) => {
    e.placeholder = t(e.dataset.i18nPlaceholder);
  });
  $("#lang").textContent = t("lang");
}

// -- API: the chosen KB, the bearer token kept for this browser session, the banner ----
let kbName = "";      // "" = the server's default KB (old paths)
let roots = [];       // the served roots of the current KB, for relative paths
const base = () => (kbName ? `/api/v1/kb/${encodeURIComponent(kbName)}` : "/api/v1");
// a token per KB (a KB may have its own), the server's token as the fallback
const tokenKey = () => (kbName ? `clawkb.token@${kbName}` : "clawkb.token");
const getToken = () => sessionStorage.getItem(tokenKey()) || sessionStorage.getItem("clawkb.token");

async function api(path, opts = {}) {
  // X-Clawkb-Request: the server refuses form-type writes without it (no other
  // web site can add it to a request it sends here).
  const headers = Object.assign({ "x-clawkb-request": "1" }, opts.headers || {});
  const token = getToken();
  if (token) headers.authorization = "Bearer " + token;
  // /api/v1/kbs is the server's own list; everything else goes to the chosen KB
  const url = path.startsWith("/api/v1/") && path !== "/api/v1/kbs" ? base() + path.slice(7) : path;
  let res;
  try {
    res = await fetch(url, Object.assign({}, opts, { headers }));
  } catch (err) {
    if (err.name !== "AbortError") offline(true);
    throw err;
  }
  offline(false);
  if (res.status === 401 && !opts.quiet) {
    await askToken(Boolean(token));
    if (!kbsLoaded) loadKbs();
    return api(path, opts);
  }
  return res;
}

function offline(down) {
  const was = !$("#banner").hidden;
  $("#banner").hidden = !down;
  if (down) {
    $("#banner-text").textContent = t("offline");
    $("#results").replaceChildren();   // never leave stale results under a new query
    $("#search-info").textContent = "";
    document.body.dataset.offline = "1";
  } else if (was) {
    delete document.body.dataset.offline;
  }
}

function askToken(refused) {
  return new Promise((resolve) => {
    const dlg = $("#token-dialog");
    $("#token-error").hidden = !refused;
    $("#token-error").textContent = t("bad_token");
    $("#token").value = "";
    dlg.addEventListener("close", () => {
      sessionStorage.setItem(tokenKey(), $("#token").value.trim());
      resolve();
    }, { once: true });
    dlg.showModal();
  });
}

async function json(path, opts) {
  const res = await api(path, opts);
  const body = await res.json();
  if (!res.ok) throw new Error(`${body.code}: ${body.message}`);
  return body;
}

function post(path, body, method = "POST") {
  return json(path, { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

// -- rendering helpers ----------------------------------------------------------
function highlighted(text, spans) {
  // spans are code-point offsets (Python); Array.from splits by code point too.
  const chars = Array.from(text || "");
  const frag = document.createDocumentFragment();
  let pos = 0;
  for (const [s, e] of spans || []) {
    if (s < pos) continue;
    frag.append(chars.slice(pos, s).join(""));
    frag.append(el("mark", null, chars.slice(s, e).join("")));
    pos = e;
  }
  frag.append(chars.slice(pos).join(""));
  return frag;
}

function rel(path) {
  // a path relative to the served root that holds it (the longest match)
  let best = "";
  for (const r of roots) if (path.startsWith(r + "/") && r.length > best.length) best = r;
  return best ? path.slice(best.length + 1) : path;
}

function where(h) {
  return `${rel(h.path)}:${h.line_start}-${h.line_end}` + (h.page ? ` p.${h.page}` : "");
}

// -- search -------------------------------------------------------------------
let searchSeq = 0;
let searchAbort = null;
let selected = -1;

function searchParams(q) {
  const p = new URLSearchParams({ q, limit: "20" });
  const path = $("#f-path").value.trim();
  if (path) p.append("path", path);
  for (const ty of $("#f-type").value.split(/[,\s]+/).filter(Boolean)) p.append("type", ty);
  for (const b of $("#f-board").value.split(/[,\s]+/).filter(Boolean)) p.append("board", b);
  if ($("#f-mode").value) p.set("mode", $("#f-mode").value);
  if ($("#f-since").value.trim()) p.set("since", $("#f-since").value.trim());
  if ($("#f-explain").checked) p.set("explain", "true");
  return p;
}

async function runSearch() {
  const q = $("#q").value.trim();
  const seq = ++searchSeq;
  if (searchAbort) searchAbort.abort();
  if (!q) { $("#results").replaceChildren(); $("#search-info").textContent = ""; return; }
  searchAbort = new AbortController();
  const started = performance.now();
  let body;
  try {
    body = await json("/api/v1/search?" + searchParams(q), { signal: searchAbort.signal });
  } catch (err) {
    if (err.name === "AbortError") return;
    if (seq === searchSeq) {
      $("#results").replaceChildren();
      if ($("#banner").hidden) $("#search-info").textContent = `${t("error")}: ${err.message}`;
    }
    return;
  }
  if (seq !== searchSeq) return;
  renderHits(body);
  const ms = Math.round(performance.now() - started);
  if (body.count) $("#search-info").textContent = t("hits", body.count, ms);
  else {
    // an abstained search: the server's reason (with its confidence) on the status line
    $("#search-info").textContent = body.abstained ? body.message || t("none") : "";
    $("#results").append(el("li", "empty", body.abstained ? t("no_match") : t("nomatch_q", q)));
  }
  document.body.dataset.lastSearchMs = String(ms);
  document.body.dataset.searches = String(Number(document.body.dataset.searches || 0) + 1);
}

function renderHits(body) {
  const list = $("#results");
  list.replaceChildren();
  selected = -1;
  body.hits.forEach((h, i) => {
    const li = el("li", "hit");
    li.tabIndex = 0;
    li.dataset.anchor = h.anchor;
    li.dataset.index = String(i);
    li.append(el("div", "loc", where(h)));
    if (h.heading_path && h.heading_path.length) li.append(el("div", "sec", "§ " + h.heading_path.join(" › ")));
    const snip = el("div", "snip");
    snip.append(highlighted(h.snippet || h.text, h.snippet ? h.highlights : []));
    li.append(snip);
    li.append(el("div", "anchor", "#" + h.anchor));
    if (h.explanation) {
      const d = el("details");
      d.append(el("summary", null, t("explain")));
      d.append(el("pre", "explain", JSON.stringify(h.explanation, null, 2)));
      d.addEventListener("click", (ev) => ev.stopPropagation());
      li.append(d);
    }
    li.addEventListener("click", () => openViewer(h.anchor));
    list.append(li);
  });
}

function select(i) {
  const items = [...document.querySelectorAll("#results .hit")];
  if (!items.length) return;
  selected = Math.max(0, Math.min(items.length - 1, i));
  items.forEach((e, k) => e.classList.toggle("sel", k === selected));
  items[selected].focus();
}

// -- source viewer ----------------------------------------------------------------
let viewing = null;

async function openViewer(anchor) {
  let v;
  try {
    v = await json(`/api/v1/source/${encodeURIComponent(anchor)}?context=400`);
  } catch (err) {
    $("#search-info").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  viewing = v;
  $("#viewer").hidden = false;
  $("#v-title").textContent = where(v) + (v.heading_path.length ? "  § " + v.heading_path.join(" › ") : "");
  $("#v-note").textContent = v.note || "";
  $("#v-prev").disabled = !v.previous;
  $("#v-next").disabled = !v.next;
  const body = $("#v-body");
  body.replaceChildren();
  let first = null;
  if (v.kind === "page") {
    for (const p of v.passages) {
      const div = el("div", "pg" + (p.current ? " hl" : ""), p.text);
      if (p.current && !first) first = div;
      body.append(div);
    }
  } else if (v.lines.length) {
    for (const ln of v.lines) {
      const inSpan = ln.n >= v.line_start && ln.n <= v.line_end;
      const row = el("div", "ln" + (inSpan ? " hl" : ""));
      row.dataset.line = String(ln.n);
      row.append(el("span", "n", ln.n), el("span", "t", ln.text));
      if (inSpan && !first) first = row;
      body.append(row);
    }
  } else {
    first = el("div", "pg hl", v.text);
    body.append(first);
  }
  if (first) first.scrollIntoView({ block: "center" });
  body.focus();
}

function closeViewer() {
  $("#viewer").hidden = true;
  viewing = null;
  const items = document.querySelectorAll("#results .hit");
  if (selected >= 0 && items[selected]) items[selected].focus();
}

// -- ask: a conversation, each turn streamed over SSE -------------------------------
let conversation = null;

async function runAsk(ev) {
  if (ev) ev.preventDefault();
  const question = $("#question").value.trim();
  if (!question) return;
  $("#question").value = "";
  const turn = el("div", "turn");
  const out = el("div", "answer", t("asking"));
  const sources = el("ol", "sources");
  turn.append(el("div", "q", question), out, sources);
  $("#thread").append(turn);
  let text = "";
  let final = null;
  let res;
  try {
    res = await api("/api/v1/chat", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ question, conversation, stream: true }),
    });
  } catch (err) {
    out.replaceChildren(el("span", "err", `${t("error")}: ${err.message}`));
    return;
  }
  if (!res.ok) {
    const body = await res.json();
    if (res.status === 404) conversation = null;  // the server forgot it: start again
    out.replaceChildren(el("span", "err", `${body.code}: ${body.message}`));
    return;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const name = (block.match(/^event: (.*)$/m) || [])[1];
      const data = JSON.parse((block.match(/^data: (.*)$/m) || [])[1] || "{}");
      if (name === "turn") {
        conversation = data.conversation;
        if (data.standalone !== question) turn.insertBefore(el("div", "muted standalone", `${t("searched")}: ${data.standalone}`), out);
      } else if (name === "token") { text += data.text; renderAnswer(out, sources, text, null); }
      else if (name === "sources") { final = data; renderAnswer(out, sources, data.answer, data); }
      else if (name === "error") { out.replaceChildren(el("span", "err", `${data.code}: ${data.message}`)); }
    }
  }
  turn.scrollIntoView({ block: "nearest" });
  if (final) document.body.dataset.answered = String(Number(document.body.dataset.answered || 0) + 1);
}

function renderAnswer(out, list, text, final) {
  out.replaceChildren();
  const byN = {};
  for (const p of (final && final.passages) || []) byN[p.n] = p;
  for (const part of text.split(/(\[\d+\])/)) {
    const m = part.match(/^\[(\d+)\]$/);
    if (m && final && byN[m[1]]) {
      const b = el("button", "cite", part);
      b.type = "button";
      b.title = where(byN[m[1]]);
      b.addEventListener("click", () => openViewer(byN[m[1]].anchor));
      out.append(b);
    } else {
      out.append(part);
    }
  }
  if (!final) return;
  list.replaceChildren(el("li", "muted", final.abstained ? t("nearest") : t("sources")));
  const shown = final.abstained ? final.passages : final.citations;
  for (const p of shown) {
    const li = el("li");
    const b = el("button", "cite", `[${p.n}]`);
    b.type = "button";
    b.addEventListener("click", () => openViewer(p.anchor));
    li.append(b, " ", el("span", "loc", where(p)));
    if (p.section) li.append(el("span", "muted", "  § " + p.section));
    list.append(li);
  }
}

// -- status -----------------------------------------------------------------------------
function kv(dl, items) {
  dl.replaceChildren();
  for (const [k, v] of items) {
    const d = el("div");
    d.append(el("dt", null, t(k)), el("dd", null, v));
    dl.append(d);
  }
}

async function loadStatus() {
  let s;
  try { s = await json("/api/v1/status"); } catch (err) {
    $("#watch-state").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  const dense = s.dense || {};
  const vectors = dense.vectors || 0;
  const srv = s.server || {};
  const search = s.search || {};
  kv($("#kb-info"), [
    ["kb_path", s.home], ["roots", (srv.roots || []).join(", ") || "—"],
    ["mode", search.mode ? `${search.mode}` + (search.configured && search.configured !== search.mode ? ` (${search.configured})` : "") : "—"],
    ["model", [search.embedding, search.llm].filter(Boolean).join(" · ") || "—"],
  ]);
  const items = [["documents", s.documents], ["chunks", s.chunks], ["vectors", vectors],
    ["pending", search.vectors_pending == null ? "—" : search.vectors_pending],
    ["segments", (s.lexical || {}).segments], ["memories", s.memories]];
  kv($("#counts"), items.filter(([, v]) => v !== undefined));
  $("#legend").textContent = t("legend");
  const w = srv.watch;
  $("#watch-state").textContent = w ? t("watch_on", w) : t("watch_off");
  const tbody = $("#runs tbody");
  tbody.replaceChildren();
  for (const r of s.runs || []) {
    const tr = el("tr");
    const c = r.counts || {};
    const errs = el("td", "err");
    for (const e of r.errors || []) errs.append(el("div", null, `${rel(e.path)}: ${e.reason}`));
    tr.append(
      el("td", null, new Date(r.started_at * 1000).toLocaleString()),
      el("td", null, r.status),
      el("td", null, `+${c.added || 0} ~${c.updated || 0} -${c.removed || 0} =${c.unchanged || 0} ✗${c.failed || 0}`),
      errs,
    );
    tbody.append(tr);
  }
}

// -- self-check (clawkb eval --self) ------------------------------------------------------
async function runSelfCheck() {
  $("#self-state").textContent = t("self_busy");
  let s;
  try { s = await json("/api/v1/eval/self"); } catch (err) {
    $("#self-state").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  $("#self-state").textContent = t("self_note", s);
  const table = $("#self-table");
  const head = el("tr");
  head.append(el("th", null, ""), el("th", null, "n"), ...s.modes.map((m) => el("th", null, m)));
  table.tHead.replaceChildren(head);
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const [kind, row] of Object.entries(s.kinds)) {
    const tr = el("tr");
    tr.dataset.kind = kind;
    tr.append(el("td", null, t("self_kind", kind)), el("td", null, row.queries),
      ...s.modes.map((m) => el("td", "num", row["hit@k"][m].toFixed(2))));
    body.append(tr);
  }
  table.hidden = false;
}

// -- hit test: ranked chunks with scores under chosen settings, saved to config.yaml ------
const H_KEYS = { "h-mode": "mode", "h-fusion": "fusion", "h-wl": "w_lexical", "h-wd": "w_dense", "h-mc": "min_confidence" };

async function loadSettings() {
  try {
    const s = await json("/api/v1/settings");
    for (const [id, key] of Object.entries(H_KEYS)) {
      const v = (s.settings["retrieval." + key] || {}).value;
      if (v !== undefined && v !== null) $("#" + id).value = String(v);
    }
  } catch (err) { $("#hits-info").textContent = `${t("error")}: ${err.message}`; }
}

async function runHitTest(ev) {
  if (ev) ev.preventDefault();
  const q = $("#h-q").value.trim();
  if (!q) return;
  const p = new URLSearchParams({ q, limit: "20", explain: "true", mode: $("#h-mode").value,
    fusion: $("#h-fusion").value, w_lexical: $("#h-wl").value, w_dense: $("#h-wd").value,
    min_confidence: $("#h-mc").value });
  const list = $("#hit-list");
  let body;
  try { body = await json("/api/v1/search?" + p); } catch (err) {
    list.replaceChildren();
    $("#hits-info").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  list.replaceChildren();
  $("#hits-info").textContent = t("hits", body.count, Math.round(body.took_ms || 0)) +
    (body.mode ? ` · ${body.mode}` : "") + (body.confidence != null ? ` · confidence ${JSON.stringify(body.confidence)}` : "");
  if (!body.count) list.append(el("li", "empty", body.message || t("nomatch_q", q)));
  body.hits.forEach((h, i) => {
    const li = el("li", "hit");
    const head = el("div", "row");
    head.append(el("span", "rank", `#${i + 1}`), el("span", "score", `${t("score")} ${Number(h.score).toFixed(4)}`),
      el("span", "loc", where(h)));
    const add = el("button", "link add-golden", t("add_golden"));
    add.type = "button";
    add.addEventListener("click", async () => {
      try {
        await post("/api/v1/golden", { query: q, expect_path: rel(h.path) });
        add.textContent = t("added_golden"); add.disabled = true;
      } catch (err) { add.textContent = err.message; }
    });
    head.append(add);
    li.append(head);
    if (h.heading_path && h.heading_path.length) li.append(el("div", "sec", "§ " + h.heading_path.join(" › ")));
    const snip = el("div", "snip");
    snip.append(highlighted(h.snippet || h.text, h.snippet ? h.highlights : []));
    li.append(snip);
    if (h.explanation) {
      const d = el("details");
      d.append(el("summary", null, t("explain")), el("pre", "explain", JSON.stringify(h.explanation, null, 2)));
      li.append(d);
    }
    list.append(li);
  });
}

async function saveSettings() {
  const retrieval = {};
  for (const [id, key] of Object.entries(H_KEYS)) {
    const v = $("#" + id).value;
    retrieval[key] = ["mode", "fusion"].includes(key) ? v : Number(v);
  }
  try {
    const s = await post("/api/v1/settings", { settings: { retrieval } }, "PUT");
    $("#hits-info").textContent = t("saved", s.file);
  } catch (err) { $("#hits-info").textContent = `${t("error")}: ${err.message}`; }
}

// -- golden queries ------------------------------------------------------------------------
async function loadGolden(report) {
  let g;
  try { g = await json("/api/v1/golden"); } catch (err) {
    $("#g-summary").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  $("#g-file").textContent = g.file;
  const byQ = {};
  for (const r of (report && report.results) || []) byQ[r.query + "\u0000" + r.expect_path] = r;
  const tbody = $("#golden tbody");
  tbody.replaceChildren();
  if (!g.queries.length) {
    const tr = el("tr", "empty");
    const td = el("td", "muted", t("g_empty"));
    td.colSpan = 4;
    tr.append(td);
    tbody.append(tr);
  }
  g.queries.forEach((q, i) => {
    const tr = el("tr");
    const r = byQ[q.query + "\u0000" + q.expect_path];
    const del = el("button", "link", t("remove"));
    del.type = "button";
    del.addEventListener("click", async () => {
      try { await post("/api/v1/golden/remove", { index: i }); loadGolden(); } catch (err) { $("#g-summary").textContent = err.message; }
    });
    const td = el("td");
    td.append(del);
    tr.append(el("td", null, q.query), el("td", "loc", q.expect_path + (q.expect_heading ? " § " + q.expect_heading : "")),
      el("td", r ? (r.passed ? "ok" : "err miss") : null, r ? t("g_rank", r) : ""), td);
    tbody.append(tr);
  });
}

async function runGolden() {
  try {
    const r = await post("/api/v1/golden/check", {});
    $("#g-summary").textContent = t("g_summary", r);
    $("#g-summary").className = "info " + (r.passed ? "ok" : "err");
    loadGolden(r);
  } catch (err) { $("#g-summary").textContent = `${t("error")}: ${err.message}`; }
}

// -- upload: drag and drop into the inbox, upload progress, then the index report --------
function upload(file) {
  const li = el("li");
  const state = el("span", "muted", t("uploading", 0));
  const bar = el("progress");
  bar.max = 100; bar.value = 0;
  li.append(el("span", "loc", file.name), " ", bar, " ", state);
  $("#uploads").prepend(li);
  const xhr = new XMLHttpRequest();   // fetch cannot report upload progress
  xhr.open("POST", base() + "/upload");
  xhr.setRequestHeader("x-clawkb-request", "1");
  const token = getToken();
  if (token) xhr.setRequestHeader("authorization", "Bearer " + token);
  xhr.upload.onprogress = (e) => {
    if (!e.lengthComputable) return;
    const p = Math.round((e.loaded / e.total) * 100);
    bar.value = p; state.textContent = p < 100 ? t("uploading", p) : t("indexing");
  };
  xhr.upload.onload = () => { bar.value = 100; state.textContent = t("indexing"); };
  xhr.onload = () => {
    let body = {};
    try { body = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
    if (xhr.status === 200) {
      state.textContent = t("indexed", body.report);
      state.className = "ok";
      li.dataset.done = "1";
    } else {
      state.textContent = `${body.code || xhr.status}: ${body.message || xhr.statusText}`;
      state.className = "err";
      li.dataset.done = "0";
    }
    bar.remove();
  };
  xhr.onerror = () => { state.textContent = t("offline"); state.className = "err"; offline(true); };
  const form = new FormData();
  form.append("file", file);
  xhr.send(form);
}

async function loadInbox() {
  try {
    const s = await json("/api/v1/status");
    $("#inbox").textContent = s.server.inbox ? t("inbox", rel(s.server.inbox)) : t("no_inbox");
    $("#drop").classList.toggle("off", !s.server.inbox);
  } catch (err) { $("#inbox").textContent = `${t("error")}: ${err.message}`; }
}

// -- knowledge bases -------------------------------------------------------------------------
let kbsLoaded = false;

async function loadKbs() {
  let k;
  try { k = await json("/api/v1/kbs", { quiet: true }); } catch (err) { return; }
  kbsLoaded = true;
  const sel = $("#kb");
  sel.replaceChildren(...k.kbs.map((x) => { const o = el("option", null, x.name); o.value = x.name; return o; }));
  const wanted = sessionStorage.getItem("clawkb.kb");
  const names = k.kbs.map((x) => x.name);
  kbName = wanted && names.includes(wanted) ? wanted : "";
  sel.value = kbName || k.default;
  sel.hidden = k.kbs.length < 2;
  roots = (k.kbs.find((x) => x.name === (kbName || k.default)) || { roots: [] }).roots;
}

function switchKb() {
  const name = $("#kb").value;
  kbName = name;
  sessionStorage.setItem("clawkb.kb", name);
  conversation = null;
  $("#thread").replaceChildren();
  $("#hit-list").replaceChildren();
  $("#results").replaceChildren();
  document.body.dataset.kb = name;
  loadKbs().then(() => { showTab(); if ($("#q").value.trim()) runSearch(); });
}

// -- tabs, keys, start ---------------------------------------------------------------------
const TABS = ["search", "ask", "hits", "golden", "upload", "status"];

function showTab() {
  let tab = (window.location.hash || "#search").slice(1);
  if (!TABS.includes(tab)) tab = "search";
  for (const name of TABS) {
    $("#tab-" + name).hidden = name !== tab;
    document.querySelector(`[data-tab=${name}]`).classList.toggle("active", name === tab);
  }
  if (tab === "status") loadStatus();
  if (tab === "ask") $("#question").focus();
  if (tab === "search") $("#q").focus();
  if (tab === "hits") { loadSettings(); $("#h-q").focus(); }
  if (tab === "golden") loadGolden();
  if (tab === "upload") loadInbox();
}

function debounce(fn, ms) {
  let timer;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
}

document.addEventListener("keydown", (ev) => {
  const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
  if (!$("#viewer").hidden) {
    if (ev.key === "Escape") { closeViewer(); ev.preventDefault(); }
    else if ((ev.key === "[" || ev.key === "ArrowLeft") && viewing && viewing.previous) openViewer(viewing.previous);
    else if ((ev.key === "]" || ev.key === "ArrowRight") && viewing && viewing.next) openViewer(viewing.next);
    return;
  }
  if (ev.key === "/" && !typing) { ev.preventDefault(); window.location.hash = "#search"; $("#q").focus(); return; }
  if ((window.location.hash || "#search") !== "#search") return;
  if (ev.key === "ArrowDown") { ev.preventDefault(); select(selected + 1); }
  else if (ev.key === "ArrowUp") { ev.preventDefault(); if (selected <= 0) $("#q").focus(); else select(selected - 1); }
  else if (ev.key === "Enter" && document.activeElement.classList.contains("hit")) {
    openViewer(document.activeElement.dataset.anchor);
  }
});

$("#lang").addEventListener("click", () => {
  lang = lang === "zh" ? "en" : "zh";
  localStorage.setItem("clawkb.lang", lang);
  applyLang();
});
// An IME (pinyin, kana…) fires input for every composition state: search only once the
// composition ends, with what was committed.
let composing = false;
const searchSoon = debounce(runSearch, 10);
$("#q").addEventListener("compositionstart", () => { composing = true; });
$("#q").addEventListener("compositionend", () => { composing = false; searchSoon(); });
$("#q").addEventListener("input", (ev) => { if (!composing && !ev.isComposing) searchSoon(); });
$("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); runSearch(); });
$("#filters").addEventListener("change", runSearch);
$("#ask-form").addEventListener("submit", runAsk);
$("#question").addEventListener("keydown", (ev) => {
  // Enter asks, Shift+Enter is a new line; never while an IME composition is open
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing && ev.keyCode !== 229) runAsk(ev);
});
$("#new-chat").addEventListener("click", () => { conversation = null; $("#thread").replaceChildren(); $("#question").focus(); });
$("#hits-form").addEventListener("submit", runHitTest);
$("#h-save").addEventListener("click", saveSettings);
$("#g-check").addEventListener("click", runGolden);
const drop = $("#drop");
["dragenter", "dragover"].forEach((n) => drop.addEventListener(n, (ev) => { ev.preventDefault(); drop.classList.add("over"); }));
["dragleave", "drop"].forEach((n) => drop.addEventListener(n, () => drop.classList.remove("over")));
drop.addEventListener("drop", (ev) => { ev.preventDefault(); [...ev.dataTransfer.files].forEach(upload); });
$("#files").addEventListener("change", (ev) => { [...ev.target.files].forEach(upload); ev.target.value = ""; });
$("#kb").addEventListener("change", switchKb);
$("#banner-retry").addEventListener("click", () => { if ($("#q").value.trim()) runSearch(); else api("/api/v1/kbs").catch(() => {}); });
$("#v-close").addEventListener("click", closeViewer);
$("#self-run").addEventListener("click", runSelfCheck);
$("#v-prev").addEventListener("click", () => viewing && viewing.previous && openViewer(viewing.previous));
$("#v-next").addEventListener("click", () => viewing && viewing.next && openViewer(viewing.next));
window.addEventListener("hashchange", showTab);
applyLang();
showTab();
loadKbs();
