"""bitsnet.webrepl_page: the one page ``bitsnet.webrepl`` serves at ``/``.

HTML, CSS and JavaScript inline, as one string constant: BITS imports modules from
/boot/python, so a module is the file it is sure to find (no data files beside it). The page
talks to the routes of ``bitsnet.webrepl.WebRepl`` (``/session``, ``/push``, ``/poll``,
``/interrupt``, ``/release``) with the access token from its own URL, and shows the console
text the server keeps (``Transcript``).
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bitsnet webrepl</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
html,body{margin:0;height:100%;background:#1d1f21;color:#c5c8c6;font:14px/1.35 ui-monospace,Menlo,Consolas,monospace}
header{display:flex;gap:1em;align-items:center;padding:.4em .8em;background:#282a2e;border-bottom:1px solid #373b41}
header b{color:#81a2be} #status{flex:1;color:#969896} #status.running{color:#f0c674} #status.bad{color:#cc6666}
button{font:inherit;background:#373b41;color:#c5c8c6;border:1px solid #4d5057;border-radius:3px;padding:.15em .7em}
button:hover{background:#4d5057}
main{padding:.5em .8em;height:calc(100% - 2.6em);overflow:auto;box-sizing:border-box}
pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:inherit}
#line{display:flex} #prompt{white-space:pre;color:#b5bd68}
textarea{flex:1;background:transparent;color:inherit;border:0;outline:0;resize:none;padding:0;font:inherit}
</style></head><body>
<header><b>bitsnet webrepl</b><span id="status">connecting...</span>
<button id="stop" title="Ctrl-C">Interrupt</button></header>
<main id="main"><pre id="out"></pre>
<div id="line"><span id="prompt">&gt;&gt;&gt; </span><textarea id="in" rows="1" spellcheck="false"
 autocomplete="off" autofocus></textarea></div></main>
<script>
"use strict";
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const out = $("out"), input = $("in"), prompt = $("prompt"), status = $("status"), main = $("main");
const repl = window.repl = {session: "", next: 0, state: "connecting", history: [], hpos: 0, queue: [],
                            busy: false, timer: 0, polling: false, again: false};
function show(text) {
  if (!text) return;
  out.appendChild(document.createTextNode(text));
  main.scrollTop = main.scrollHeight;
}
function call(method, path, body) {
  return fetch(path, {method: method, body: body, cache: "no-store",
                      headers: {"X-Repl-Token": TOKEN, "X-Repl-Session": repl.session}});
}
function setState(state, note) {
  repl.state = state;
  prompt.textContent = state === "more" ? "... " : state === "ready" ? ">>> " : "";
  input.disabled = state === "closed" || state === "lost";
  status.className = state === "running" ? "running" : (state === "closed" || state === "lost") ? "bad" : "";
  status.textContent = note || {ready: "ready", more: "block: an empty line ends it", running: "running...",
                                closed: "the web REPL has stopped"}[state] || state;
}
async function take(resp, since) {
  const text = await resp.text();
  if (resp.status === 409 && resp.headers.get("X-Repl-Error")) {
    show(text); setState("lost", resp.headers.get("X-Repl-Error") === "busy" ? "console in use elsewhere"
                                                                         : "session lost: reload");
    return false;
  }
  if (resp.status === 403) { show(text); setState("lost", "forbidden: wrong token"); return false; }
  const next = resp.headers.get("X-Repl-Next");
  if (next !== null && since === repl.next) {  // a late answer to an old offset is dropped
    show(text); repl.next = +next;
  }
  const state = resp.headers.get("X-Repl-State");
  if (state) setState(state);
  return true;
}
async function poll() {  // one poll in flight at a time; a request meanwhile polls again after
  clearTimeout(repl.timer);
  if (repl.polling) { repl.again = true; return; }
  if (repl.state === "lost" || repl.state === "closed") return;
  repl.polling = true;
  try {
    const since = repl.next;
    if (!await take(await call("GET", "/poll?since=" + since), since)) return;
  } catch (e) { setState(repl.state, "no answer from the firmware; retrying"); }
  finally { repl.polling = false; }
  pump();
  const soon = repl.again || repl.state === "running";
  repl.again = false;
  repl.timer = setTimeout(poll, soon ? 150 : 2000);
}
async function pump() {
  if (repl.busy || repl.state === "running" || !repl.queue.length) return;
  if (repl.state !== "ready" && repl.state !== "more") return;
  repl.busy = true;
  const line = repl.queue.shift();
  try {
    const resp = await call("POST", "/push", line);
    if (resp.status === 409 && !resp.headers.get("X-Repl-Error")) repl.queue.unshift(line);
    await take(resp);
  } finally { repl.busy = false; }
  poll();
}
function submit() {
  const text = input.value;
  input.value = "";
  if (text.trim()) { repl.history.push(text); }
  repl.hpos = repl.history.length;
  for (const line of text.split(/\\r?\\n/)) repl.queue.push(line);
  pump();
}
async function interrupt() {
  repl.queue = [];
  await take(await call("POST", "/interrupt"));
  poll();
}
input.addEventListener("keydown", (ev) => {
  const before = input.value.slice(0, input.selectionStart), after = input.value.slice(input.selectionEnd);
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); submit(); }
  else if (ev.key === "ArrowUp" && before.indexOf("\\n") < 0 && repl.hpos > 0) {
    ev.preventDefault(); input.value = repl.history[--repl.hpos];
  } else if (ev.key === "ArrowDown" && after.indexOf("\\n") < 0 && repl.hpos < repl.history.length) {
    ev.preventDefault(); repl.hpos++; input.value = repl.history[repl.hpos] || "";
  } else if (ev.key === "Tab") {
    ev.preventDefault(); input.setRangeText("    ", input.selectionStart, input.selectionEnd, "end");
  } else if (ev.key === "c" && ev.ctrlKey && input.selectionStart === input.selectionEnd) {
    ev.preventDefault(); interrupt();
  }
});
input.addEventListener("input", () => { input.rows = Math.min(12, input.value.split("\\n").length); });
$("stop").addEventListener("click", interrupt);
main.addEventListener("click", () => { if (!getSelection().toString()) input.focus(); });
addEventListener("pagehide", () => {
  if (repl.session) navigator.sendBeacon("/release?token=" + encodeURIComponent(TOKEN) + "&session=" +
                                         encodeURIComponent(repl.session));
});
(async () => {
  const resp = await call("POST", "/session");
  repl.session = resp.headers.get("X-Repl-Session") || "";
  if (await take(resp, 0)) poll();
})();
</script></body></html>
"""
