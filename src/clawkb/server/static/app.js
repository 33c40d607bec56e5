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
    token_prompt: "This server needs an access token.", hits: (n, ms) => `${n} results · ${ms} ms`,
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

// -- API with the bearer token kept for this browser session ------------------
async function api(path, opts = {}) {
  // X-Clawkb-Request: the server refuses form-type writes without it (no other
  // web site can add it to a request it sends here).
  const headers = Object.assign({ "x-clawkb-request": "1" }, opts.headers || {});
  const token = sessionStorage.getItem("clawkb.token");
  if (token) headers.authorization = "Bearer " + token;
  const res = await fetch(path, Object.assign({}, opts, { headers }));
  if (res.status === 401) {
    await askToken();
    return api(path, opts);
  }
  return res;
}

function askToken() {
  return new Promise((resolve) => {
    const dlg = $("#token-dialog");
    dlg.addEventListener("close", () => {
      sessionStorage.setItem("clawkb.token", $("#token").value.trim());
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

function where(h) {
  return `${h.path}:${h.line_start}-${h.line_end}` + (h.page ? ` p.${h.page}` : "");
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
    if (seq === searchSeq) $("#search-info").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  if (seq !== searchSeq) return;
  renderHits(body);
  const ms = Math.round(performance.now() - started);
  $("#search-info").textContent = body.count ? t("hits", body.count, ms) : (body.message || t("none"));
  document.body.dataset.lastSearchMs = String(ms);
  document.body.dataset.searches = String(Number(document.body.dataset.searches || 0) + 1);
}

function renderHits(body) {
  const list = $("#results");
  list.replaceChildren();
  selected = -1;
  if (!body.hits.length) list.append(el("li", "empty", body.abstained ? t("no_match") : t("none")));
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

// -- ask (streamed over SSE) ---------------------------------------------------------
async function runAsk(ev) {
  ev.preventDefault();
  const question = $("#question").value.trim();
  if (!question) return;
  const out = $("#answer");
  out.replaceChildren(el("span", "muted", t("asking")));
  $("#sources").replaceChildren();
  let text = "";
  let final = null;
  const res = await api("/api/v1/ask", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ question, stream: true }),
  });
  if (!res.ok) {
    const body = await res.json();
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
      if (name === "token") { text += data.text; renderAnswer(text, null); }
      else if (name === "sources") { final = data; renderAnswer(data.answer, data); }
      else if (name === "error") { out.replaceChildren(el("span", "err", `${data.code}: ${data.message}`)); }
    }
  }
  if (final) document.body.dataset.answered = "1";
}

function renderAnswer(text, final) {
  const out = $("#answer");
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
  const list = $("#sources");
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
async function loadStatus() {
  let s;
  try { s = await json("/api/v1/status"); } catch (err) {
    $("#watch-state").textContent = `${t("error")}: ${err.message}`;
    return;
  }
  const counts = $("#counts");
  counts.replaceChildren();
  const dense = s.dense || {};
  const items = [["documents", s.documents], ["chunks", s.chunks], ["vectors", dense.vectors || 0],
    ["segments", (s.lexical || {}).segments], ["memories", s.memories]];
  for (const [k, v] of items) {
    if (v === undefined) continue;
    const d = el("div");
    d.append(el("dt", null, t(k)), el("dd", null, v));
    counts.append(d);
  }
  const w = s.server && s.server.watch;
  $("#watch-state").textContent = w ? t("watch_on", w) : t("watch_off");
  const tbody = $("#runs tbody");
  tbody.replaceChildren();
  for (const r of s.runs || []) {
    const tr = el("tr");
    const c = r.counts || {};
    const errs = el("td", "err");
    for (const e of r.errors || []) errs.append(el("div", null, `${e.path}: ${e.reason}`));
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

// -- tabs, keys, start ---------------------------------------------------------------------
function showTab() {
  const tab = (window.location.hash || "#search").slice(1);
  for (const name of ["search", "ask", "status"]) {
    $("#tab-" + name).hidden = name !== tab;
    document.querySelector(`[data-tab=${name}]`).classList.toggle("active", name === tab);
  }
  if (tab === "status") loadStatus();
  if (tab === "ask") $("#question").focus();
  if (tab === "search") $("#q").focus();
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
$("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); runSearch(); });
$("#q").addEventListener("input", debounce(runSearch, 60));
$("#filters").addEventListener("change", runSearch);
$("#ask-form").addEventListener("submit", runAsk);
$("#question").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) runAsk(ev);
});
$("#v-close").addEventListener("click", closeViewer);
$("#self-run").addEventListener("click", runSelfCheck);
$("#v-prev").addEventListener("click", () => viewing && viewing.previous && openViewer(viewing.previous));
$("#v-next").addEventListener("click", () => viewing && viewing.next && openViewer(viewing.next));
window.addEventListener("hashchange", showTab);
applyLang();
showTab();
