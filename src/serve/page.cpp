// The page at GET /: drop an image to read its text (lines drawn on it) or to label it
// zero-shot, type text to embed it, chat with a generative model (about an image too, with a
// vision-language model; the answer streams in as it is made) or transcribe an audio file. Plain HTML and script, no outside resources.
#include "serve/server.h"

namespace mminfer::serve {

const std::string& index_page() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mminfer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
 #drop{border:2px dashed #888;border-radius:8px;padding:2em;text-align:center;cursor:pointer}
 #drop.over{background:#eef}
 canvas{max-width:100%;margin-top:1em;border:1px solid #ccc}
 label{margin-right:1em} input[type=text]{width:60%} .err{color:#b00}
 table{border-collapse:collapse;margin-top:.5em} td{padding:2px 8px;border-bottom:1px solid #eee}
</style></head><body>
<h1>mminfer</h1>
<p><label><input type="radio" name="task" value="ocr" checked> read text (OCR)</label>
<label><input type="radio" name="task" value="classify"> label the image</label>
<input type="text" id="labels" placeholder="labels, comma-separated: cat, dog, a car"></p>
<div id="drop">Drop an image here, or click to choose one<input type="file" id="file" accept="image/*" hidden></div>
<canvas id="canvas" hidden></canvas>
<div id="result"></div>
<h2>Text</h2>
<p><input type="text" id="text" placeholder="a sentence to embed"> <button id="embed">Embed</button></p>
<div id="embedding"></div>
<h2>Chat</h2>
<p><select id="chat-model"></select> <input type="text" id="message" placeholder="a message"> <button id="send">Send</button>
<label>image (vision-language models): <input type="file" id="chat-image" accept="image/*"></label>
<label>at most <input type="number" id="max-tokens" value="256" min="1" style="width:5em"> tokens</label></p>
<div id="chat"></div>
<h2>Speech</h2>
<p><select id="speech-model"></select> <input type="file" id="audio" accept="audio/*"></p>
<div id="transcript"></div>
<p><label>API key, when the server asks for one: <input type="password" id="key" autocomplete="off"></label></p>
<script>
const $ = (id) => document.getElementById(id);
const show = (el, html) => { $(el).innerHTML = html; };
// Sent as OpenAI clients send it; kept for this tab only.
$('key').value = sessionStorage.getItem('mminfer-key') || '';
$('key').onchange = () => sessionStorage.setItem('mminfer-key', $('key').value);
const auth = (headers) => $('key').value ? {...headers, Authorization: 'Bearer ' + $('key').value} : headers;
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function answer(res) {
  const body = await res.json().catch(() => ({error: 'the server sent no JSON'}));
  if (!res.ok) throw new Error((body.error && body.error.message) || body.error || res.statusText);  // /v1: OpenAI's envelope
  return body;
}
function draw(img, lines) {
  const c = $('canvas'); c.hidden = false; c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  g.strokeStyle = '#e0218a'; g.lineWidth = Math.max(2, img.naturalWidth / 400);
  for (const l of lines || []) { g.beginPath(); l.box.forEach(([x, y], i) => i ? g.lineTo(x, y) : g.moveTo(x, y)); g.closePath(); g.stroke(); }
}
async function run(file) {
  show('result', 'working…');
  const url = URL.createObjectURL(file);
  const img = new Image(); img.src = url; await img.decode().catch(() => {});
  const task = document.querySelector('input[name=task]:checked').value;
  try {
    if (task === 'ocr') {
      const r = await answer(await fetch('/v1/ocr', {method: 'POST', headers: auth({'Content-Type': file.type || 'application/octet-stream'}), body: file}));
      draw(img, r.lines);
      show('result', '<ol id="lines">' + r.lines.map((l) => '<li>' + esc(l.text) + ' <small>(' + l.score.toFixed(3) + ')</small></li>').join('') +
           '</ol><small>' + r.lines.length + ' lines in ' + r.ms + ' ms</small>');
    } else {
      const data = await new Promise((ok) => { const fr = new FileReader(); fr.onload = () => ok(fr.result); fr.readAsDataURL(file); });
      const labels = $('labels').value.split(',').map((s) => s.trim()).filter((s) => s);
      const r = await answer(await fetch('/v1/classify', {method: 'POST', headers: auth({'Content-Type': 'application/json'}),
                                                          body: JSON.stringify({image: data, labels})}));
      draw(img, []);
      show('result', '<table id="scores">' + r.labels.map((s) => '<tr><td>' + esc(s.label) + '</td><td>' + (100 * s.score).toFixed(1) + '%</td></tr>').join('') + '</table>');
    }
  } catch (e) { show('result', '<p class="err">' + esc(e.message) + '</p>'); }
}
const drop = $('drop');
drop.onclick = () => $('file').click();
$('file').onchange = (e) => e.target.files[0] && run(e.target.files[0]);
drop.ondragover = (e) => { e.preventDefault(); drop.classList.add('over'); };
drop.ondragleave = () => drop.classList.remove('over');
drop.ondrop = (e) => { e.preventDefault(); drop.classList.remove('over'); e.dataTransfer.files[0] && run(e.dataTransfer.files[0]); };
$('embed').onclick = async () => {
  try {
    const r = await answer(await fetch('/v1/embeddings', {method: 'POST', headers: auth({'Content-Type': 'application/json'}),
                                                          body: JSON.stringify({model: 'clip', input: $('text').value})}));
    const v = r.data[0].embedding;
    show('embedding', '<p id="dims">' + v.length + ' dimensions: ' + v.slice(0, 6).map((x) => x.toFixed(4)).join(', ') + ', …</p>');
  } catch (e) { show('embedding', '<p class="err">' + esc(e.message) + '</p>'); }
};
fetch('/v1/models', {headers: auth({})}).then(answer).then((r) => {
  for (const sel of ['chat-model', 'speech-model'])
    $(sel).innerHTML = r.data.map((m) => '<option>' + esc(m.id) + '</option>').join('');
}).catch(() => {});
// The conversation so far; each answer streams in as server-sent events.
const history = [];
window.chatEvents = 0;
$('send').onclick = async () => {
  const text = $('message').value;
  if (!text) return;
  // An image chosen (or dropped on the field) goes with this message, as a data URL.
  const image = $('chat-image').files[0];
  const url = image && await new Promise((ok) => { const fr = new FileReader(); fr.onload = () => ok(fr.result); fr.readAsDataURL(image); });
  history.push({role: 'user', content: url ? [{type: 'image_url', image_url: {url}}, {type: 'text', text}] : text});
  $('chat-image').value = '';
  const asked = document.createElement('p'); asked.className = 'user'; asked.textContent = text;
  const out = document.createElement('p'); out.className = 'assistant';
  $('chat').append(asked, out);
  try {
    const res = await fetch('/v1/chat/completions', {method: 'POST', headers: auth({'Content-Type': 'application/json'}),
                                                     body: JSON.stringify({model: $('chat-model').value, messages: history, stream: true,
                                                                          max_tokens: Number($('max-tokens').value) || undefined})});
    if (!res.ok) await answer(res);
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let pending = '', said = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      pending += decoder.decode(value, {stream: true});
      for (let end; (end = pending.indexOf('\n\n')) >= 0; pending = pending.slice(end + 2)) {
        const event = pending.slice(0, end);
        if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
        const j = JSON.parse(event.slice(6));
        if (j.error) throw new Error(j.error.message || j.error);
        window.chatEvents++;
        const piece = j.choices[0] && j.choices[0].delta.content;
        if (piece) { said += piece; out.textContent = said; }
      }
    }
    history.push({role: 'assistant', content: said});
    out.classList.add('done');
  } catch (e) { history.pop(); out.className = 'err'; out.textContent = e.message; }
};
$('audio').onchange = async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  show('transcript', 'working…');
  const form = new FormData();
  form.append('model', $('speech-model').value);
  form.append('file', file);
  try {
    const r = await answer(await fetch('/v1/audio/transcriptions', {method: 'POST', headers: auth({}), body: form}));
    show('transcript', '<p id="transcript-text">' + esc(r.text) + '</p>');
  } catch (err) { show('transcript', '<p class="err">' + esc(err.message) + '</p>'); }
};
</script></body></html>
)HTML";
  return page;
}

}  // namespace mminfer::serve
