// The samples area in the browser: the body of gr.HTML's js_on_load (element, trigger, props, watch).
// Messages (playground/ui/samples_area.py) update a model of the run; the active view appends what
// it has not drawn yet, once per animation frame; after that frame the browser acknowledges the
// highest message painted (trigger('ack')), which lets the server send the next one.
const root = element.querySelector('.sa') || element;
const PARTIAL = '\u27e8\u2026\u27e9';
const MARKS = {' ': '\u00b7', '\t': '\u2192', '\r': '\u240d', '\n': '\u21b5', '\u00a0': '\u237d'};
// 10 buckets each: probability of the sampled token (red: unlikely, green: likely) and the token's
// entropy in bits (light: sure, dark: spread), 0.35 bit per bucket. The entropy is the server's
// number (a lower bound from the top-k, analysis.token_entropy): the page never derives its own.
const PROB = ['#d73027', '#e75b3a', '#f4874b', '#fab065', '#fdd384', '#f0ea9c', '#d2ec95', '#a9da7f', '#7bc56c', '#4ea95d'];
const ENTR = ['#f7f4f9', '#ebe4f1', '#ddd0e7', '#cdb9dc', '#bca1d0', '#ab89c4', '#9a70b8', '#8a58aa', '#7a419b', '#69298a'];
const NEUTRAL = '#e6e6e6';
const ENTROPY_STEP = 0.35;

if (!document.getElementById('sa-palette')) {
  const style = document.createElement('style');
  style.id = 'sa-palette';
  style.textContent = PROB.map((c, k) => `.sa-wall.by-p .p${k}{background:${c}}`).join('') +
    ENTR.map((c, k) => `.sa-wall.by-e .e${k}{background:${c}}` + (k > 5 ? `.sa-wall.by-e .e${k}{color:#fff}` : '')).join('') +
    `.sa-wall .nx{background:${NEUTRAL}}`;
  document.head.appendChild(style);
}

root.innerHTML = `
<div class="sa-bar">
  <span class="sa-group" data-for="view"><button data-view="columns">Columns</button><button data-view="wall">Token wall</button></span>
  <span class="sa-group sa-wallonly" data-for="colour">colour by <button data-colour="p">probability</button><button data-colour="e">entropy</button></span>
  <span class="sa-group sa-wallonly" data-for="cells">cells <button data-cells="text">text</button><button data-cells="blocks">blocks</button></span>
  <span class="sa-legend sa-wallonly"></span>
  <span class="sa-note"></span>
</div>
<div class="sa-columns"><div class="sa-empty">The n samples stream here after Run (Ctrl+Enter): a column each, or a row each in the token wall.</div></div>
<div class="sa-wallbox"><div class="sa-wall by-p"><div class="sa-space"></div></div><div class="sa-map"><canvas></canvas><div class="sa-lens"></div></div></div>
<div class="sa-tip" hidden></div>`;
const bar = root.querySelector('.sa-bar'), note = root.querySelector('.sa-note');
const columnsBox = root.querySelector('.sa-columns'), wallBox = root.querySelector('.sa-wallbox');
const wall = root.querySelector('.sa-wall'), space = root.querySelector('.sa-space'), map = root.querySelector('.sa-map');
const canvas = map.querySelector('canvas'), lens = map.querySelector('.sa-lens'), tip = root.querySelector('.sa-tip');
if (props.wall_height) wallBox.style.setProperty('--sa-wall-height', props.wall_height);

// The model of the run on screen.
let M = empty();
function empty() {
  return {run: null, id: '', n: 0, seeds: [], T: [], L: [], K: [], E: [], W: [], t0: [], t1: [], fin: [], past: [], st: '', lead: '',
          order: [], shared: [], rank: [], lp: false};
}
let seq = 0, key = '', needReset = false, chosenView = null, view = 'columns', colour = 'p', selected = null;
let marked = new Set();  // the samples of the answer group last clicked in the Set tab
let cards = [], colDone = [], mapDone = [];
let dirtyCol = new Set(), dirtyWall = new Set(), mapDirty = true;
const stats = root.__sa = {tokens: 0, painted: 0, messages: 0, bytes: 0, resets: 0, applyMs: 0, drawMs: 0, mapMs: 0,
  view: () => view, status: () => M.st, model: () => M};

// As the Python views draw a token (analysis/display.py, visible): whitespace marked, control and
// invisible format characters (zero-width, direction marks and overrides) by their code point.
const codePoint = (c) => `\u27e8U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}\u27e9`;
const visible = (piece) => piece === '' ? PARTIAL
  : piece.replace(/[ \t\r\n\u00a0]/g, (c) => MARKS[c]).replace(/[\x00-\x1f\x7f\p{Cf}]/gu, codePoint);
const prob = (lp) => lp === null || lp === undefined ? null : Math.exp(lp);
const bucket = (x, step) => Math.max(0, Math.min(9, Math.floor(x / step)));

// Messages come by two ways (the component's value, and the answer to an ack), so a delta may
// arrive before the one before it: it is held until that one comes (a reset of n=256 x 1,000 tokens
// is 20 MB), for HOLD_MS at most; then the area asks for a reset.
const HOLD_MS = 1500;
let held = new Map(), holding = null;
function receive(text) {
  let m;
  const started = performance.now();
  try { m = JSON.parse(text); } catch (e) { return; }
  if (!m || typeof m.s !== 'number') return;
  // Two events (a run's stream and Stop, say) may deliver their messages out of order: one older
  // than what the area holds is stale, and a stale reset would wipe a newer run.
  if (m.s <= seq) return;
  stats.messages++; stats.bytes += text.length;  // characters of JSON: bytes, but for non-ASCII text
  if (m.k === 'd' && m.r === M.run && m.s > seq + 1) {
    held.set(m.s, m);
    if (holding === null) holding = setTimeout(() => { holding = null; release(true); }, HOLD_MS);
  } else {
    take(m);
    release(false);
  }
  stats.applyMs += performance.now() - started;
  frame();
}
function release(all) {  // the held deltas that follow what the area has (all: waited enough)
  for (const s of [...held.keys()].sort((a, b) => a - b)) {
    if (s <= seq) { held.delete(s); continue; }
    if (s !== seq + 1 && !all) break;
    const m = held.get(s); held.delete(s); take(m);
  }
  if (held.size === 0 && holding !== null) { clearTimeout(holding); holding = null; }
  if (all) frame();
}
function take(m) {
  if (m.ak) key = m.ak;
  if (m.k === 'r') reset(m);
  else if (m.k === 'v') { chosenView = m.v; setView(m.v); }
  else if (m.k === 'd') {
    if (m.r !== M.run || m.s !== seq + 1) needReset = true;  // a delta of a run we lack, or one lost
    else apply(m);
  }
  seq = Math.max(seq, m.s);
}

function reset(m) {
  M = empty();
  M.run = m.r; M.id = m.id || ''; M.n = m.n; M.seeds = m.sd || []; M.lead = m.pf || '';
  for (let i = 0; i < m.n; i++) {
    M.T.push([]); M.L.push([]); M.K.push([]); M.E.push([]); M.W.push(0); M.t0.push(null); M.t1.push(null); M.fin.push(null); M.past.push('');
    M.order.push(i); M.shared.push(0); M.rank.push(i);
  }
  stats.resets++;
  if (m.v) chosenView = m.v;
  columnsBox.textContent = '';
  for (const r of live.values()) r.row.remove();
  live = new Map(); spaceH = -1; spaceW = 0; space.style.width = '1px';
  cards = []; colDone = new Array(m.n).fill(0); mapDone = new Array(m.n).fill(0); selected = null; marked = new Set();
  dirtyCol = new Set(M.order); dirtyWall = new Set(M.order); mapDirty = true;
  setView(chosenView || (props.view === 'auto' || !props.view ? (m.n <= (props.columns_up_to || 16) ? 'columns' : 'wall') : props.view));
  apply(m);
}

function apply(m) {
  for (const u of (m.u || [])) {
    const i = u[0], pos = u[1];
    if (i >= M.n || pos !== M.T[i].length) { needReset = true; continue; }
    const texts = u[3];
    for (let j = 0; j < texts.length; j++) {
      M.T[i].push(texts[j]);
      M.W[i] += textW(texts[j]);
      M.L[i].push(u[4] ? u[4][j] : null);
      M.K[i].push(u[5] ? u[5][j] : null);
      M.E[i].push(u[6] ? u[6][j] : null);
      if (u[4] && u[4][j] !== null) M.lp = true;
    }
    if (u.length > 7) M.t0[i] = u[7];
    M.t1[i] = u[2];
    dirtyCol.add(i); dirtyWall.add(i);
  }
  for (const [i, reason, past] of (m.f || [])) { M.fin[i] = reason; M.past[i] = past || ''; dirtyCol.add(i); dirtyWall.add(i); }
  if (m.o) {
    let moved = m.o.length !== M.order.length;
    for (let r = 0; r < m.o.length; r++) if (M.rank[m.o[r]] !== r) { M.rank[m.o[r]] = r; moved = true; }
    M.order = m.o; M.shared = m.c;
    if (moved) mapDirty = true;  // the map draws rows by rank; shared prefixes alone do not move it
  }
  if (m.st && m.st !== M.st) {
    M.st = m.st;
    if (m.st === 'aborted') for (let i = 0; i < M.n; i++) if (!M.fin[i]) { dirtyCol.add(i); dirtyWall.add(i); }
  }
}

// --- drawing, once per animation frame ------------------------------------------------------------
let asked = false, ackDue = false;
function frame() { ackDue = true; redraw(); }
function redraw() {
  if (asked) return;
  asked = true;
  requestAnimationFrame(() => {
    asked = false;
    draw();
    if (ackDue) { ackDue = false; setTimeout(ack, 0); }  // runs after this frame was painted
  });
}
// The ack goes by the component's server function (a plain request: Gradio's event machinery costs
// ~45 ms of the page's main thread per event at this page's size), and its answer is the next
// message when the stream has one ready; without the session's key, by the component's event.
function ack() {
  const data = {s: seq, r: needReset ? 1 : 0};
  needReset = false;
  if (!key || typeof server === 'undefined' || !server.painted) { trigger('ack', data); return; }
  server.painted({...data, k: key}).then((text) => { if (text) receive(text); }, () => trigger('ack', data));
}

function finishLabel(i) {
  if (M.fin[i]) return M.fin[i];  // its words and mark from the server (samples_feed.finish_text)
  return M.st === 'aborted' ? '\u25a0 stopped' : '';
}
function header(i) {  // how the sample ended before its timing: a narrow column cuts the end, and the title keeps it all
  const n = M.T[i].length, parts = ['#' + i, M.seeds[i] === null || M.seeds[i] === undefined ? 'unseeded' : 'seed ' + M.seeds[i], n + ' tok'];
  const f = finishLabel(i);
  if (f) parts.push(f);
  if (M.t0[i] !== null) {
    parts.push('TTFT ' + M.t0[i].toFixed(2) + ' s');
    if (n > 1 && M.t1[i] > M.t0[i]) parts.push(((n - 1) / (M.t1[i] - M.t0[i])).toFixed(1) + ' tok/s');
  }
  return parts.join(' \u00b7 ');
}

function draw() {
  const started = performance.now();
  if (view === 'columns') drawColumns(); else drawWall();
  let tokens = 0;
  for (let i = 0; i < M.n; i++) tokens += M.T[i].length;
  stats.tokens = tokens; stats.painted++;
  stats.drawMs += performance.now() - started;
  const anyTokens = tokens > 0;
  note.textContent = view === 'wall' && anyTokens && !M.lp
    ? 'No logprobs recorded: tokens are coloured neutrally (set logprobs \u2265 1 to colour them).'
    : (view === 'wall' && colour === 'e' && anyTokens ? 'entropy in bits (a lower bound from the top-k, as in the Logprobs tab)' : '');
}

function makeCards() {  // the columns' cards, made the first time the columns are drawn for this run
  const cf = document.createDocumentFragment();
  for (let i = 0; i < M.n; i++) {
    const card = document.createElement('div'); card.className = i === selected ? 'sa-card sel' : 'sa-card'; card.dataset.i = i;
    if (marked.has(i)) card.classList.add('mk');
    const head = document.createElement('div'); head.className = 'sa-head';
    const body = document.createElement('div'); body.className = 'sa-text';
    const text = document.createTextNode(''); body.appendChild(text);
    card.append(head);
    if (M.lead) {  // a branch: the start its samples share, which they continue
      const lead = document.createElement('div'); lead.className = 'sa-lead'; lead.textContent = M.lead + ' \u25B8';
      lead.title = 'the branch\'s start, shared by every sample (the tokens it was sent after): each sample continues it';
      card.append(lead);
    }
    card.append(body); cf.appendChild(card);
    cards.push({card, head, text, said: '', past: null});
    dirtyCol.add(i);
  }
  columnsBox.appendChild(cf);
}

function drawColumns() {
  if (cards.length < M.n) makeCards();
  for (const i of dirtyCol) {
    const c = cards[i], T = M.T[i];
    if (T.length > colDone[i]) { c.text.appendData(T.slice(colDone[i]).join('')); colDone[i] = T.length; }
    if (M.past[i] && !c.past) pastApart(c, M.past[i]);
    const h = header(i);
    if (h !== c.said) { c.head.textContent = h; c.head.title = h; c.said = h; }  // the title: all of it, when cut
  }
  dirtyCol.clear();
}

// What a stopped sample sampled past its text (its end-of-sequence token, or the stop string), in
// a quieter style after the text: vLLM leaves it out of the text, and the model did sample it.
function pastApart(c, past) {
  const d = c.text.data;
  if (!d.endsWith(past)) return;
  c.text.deleteData(d.length - past.length, past.length);
  c.past = document.createElement('span'); c.past.className = 'sa-past'; c.past.textContent = past;
  c.past.title = 'what ended the sample (a special token or the stop string): sampled, not part of its text';
  c.text.parentNode.appendChild(c.past);
}

function cellClass(i, p) {
  const lp = M.L[i][p];
  if (lp === null || lp === undefined) return 'tk nx';
  const e = M.E[i][p];
  return 'tk p' + bucket(Math.exp(lp), 0.1) + (e === null || e === undefined ? ' ex' : ' e' + bucket(e, ENTROPY_STEP));
}

// The wall is virtual: rows sit at top = rank x rowH in a box as tall as all of them, and only the
// rows in view (and a margin) exist in the DOM, so a frame costs the same at n=32 and n=1024.
const MARGIN_ROWS = 12;
// A row's cells go in segments of SEGMENT: a new token lays out its segment, not the whole row.
const SEGMENT = 16;
// Rows are virtual across too: a row's cells exist up to a screen past the wall's right edge (a
// width estimated from the text, never read from the layout), and the rest is drawn as the wall
// scrolls there. At n=256 x 1,000 tokens a row would otherwise hold 1,000 cells, and the layout of
// the rows in view grew with every token (300 ms frames by the end of the run).
// At most CELL_BUDGET new cells per frame; the rest follow in the next frames.
const CELL_BUDGET = 3000, LABEL_W = 48, BLOCK_W = 8;
let charW = 0;  // a lower bound of a character's width in the wall's text cells (px)
function textW(piece) {
  if (!charW) {
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = '11px ui-monospace, SFMono-Regular, Menlo, monospace';
    charW = Math.max(4, 0.9 * ctx.measureText('0123456789').width / 10);
  }
  return 3 + charW * (piece === '' ? 3 : piece.length);  // padding and margin: 3 px
}
const cellW = (i, p) => rowH === 16 ? textW(M.T[i][p]) : BLOCK_W;
const cellAt = (r, p) => p < 0 ? null : (r.cells.children[Math.floor(p / SEGMENT)] || {children: []}).children[p % SEGMENT] || null;
let rowH = 16, viewTop = 0, viewH = 0, viewLeft = 0, viewW = 0, spaceH = -1, spaceW = 0, live = new Map();
function makeRow(i) {
  const row = document.createElement('div'); row.className = i === selected ? 'sa-row sel' : 'sa-row'; row.dataset.i = i;
  if (marked.has(i)) row.classList.add('mk');
  const label = document.createElement('span'); label.className = 'sa-label'; label.textContent = '#' + i;
  const cells = document.createElement('span'); cells.className = 'sa-cells';
  const end = document.createElement('span'); end.className = 'sa-end';
  row.append(label, cells, end);
  return {row, cells, end, done: 0, w: LABEL_W, said: '', top: -1, dv: -1};
}
function drawWall() {
  const height = M.n * rowH;
  if (spaceH !== height) {
    spaceH = height;
    space.style.height = height + 'px';
    wall.style.height = `min(${height + 18}px, var(--sa-wall-height, 70vh))`;
    if (!viewH) viewH = Math.min(height, window.innerHeight * 0.7);  // until the ResizeObserver says
  }
  const first = Math.max(0, Math.floor(viewTop / rowH) - MARGIN_ROWS);
  const last = Math.min(M.n - 1, Math.ceil((viewTop + viewH) / rowH) + MARGIN_ROWS);
  for (const [i, r] of live) {
    const k = M.rank[i];
    if (k < first || k > last) { r.row.remove(); live.delete(i); }
  }
  const ctx = mapContext();
  const right = viewLeft + 2 * (viewW || window.innerWidth);  // cells exist up to a screen past the edge
  let budget = CELL_BUDGET, more = false;
  for (let k = first; k <= last; k++) {
    const i = M.order[k];
    let r = live.get(i);
    if (!r) { r = makeRow(i); live.set(i, r); wall.appendChild(r.row); }
    if (r.top !== k) { r.row.style.top = (k * rowH) + 'px'; r.top = k; }
    const at = k > 0 && M.shared[k] > 0 ? M.shared[k] : -1;
    if (at !== r.dv) {
      const old = cellAt(r, r.dv);
      if (old) old.classList.remove('dv');
      r.dv = at;
      const cell = cellAt(r, at);
      if (cell) cell.classList.add('dv');
    }
    const T = M.T[i];
    let p = r.done;
    for (; p < T.length && r.w < right; p++) {
      if (budget-- <= 0) { more = true; break; }
      if (p % SEGMENT === 0) r.cells.appendChild(document.createElement('span')).className = 'sa-seg';
      const s = document.createElement('span');
      s.className = p === r.dv ? cellClass(i, p) + ' dv' : cellClass(i, p);
      s.textContent = visible(T[p]);
      r.cells.lastChild.appendChild(s);
      r.w += cellW(i, p);
    }
    r.done = p;
    const seed = M.seeds[i] === null || M.seeds[i] === undefined ? 'unseeded' : 'seed ' + M.seeds[i];
    const end = [finishLabel(i), seed].filter(Boolean).join(' \u00b7 ');
    if (end !== r.said) { r.end.textContent = end; r.said = end; }
  }
  if (ctx) {
    if (mapDirty) { const t = performance.now(); drawMap(ctx); stats.mapMs += performance.now() - t; }
    else for (const i of dirtyWall) for (let p = mapDone[i]; p < M.T[i].length; p++) mapCell(ctx, i, p);
    for (const i of dirtyWall) mapDone[i] = M.T[i].length;
  }
  dirtyWall.clear();
  // The box is as wide as the longest row will be (its cells not drawn yet too), in steps, so the
  // wall scrolls across to them.
  let widest = 0;
  for (let i = 0; i < M.n; i++) widest = Math.max(widest, rowH === 16 ? M.W[i] : M.T[i].length * BLOCK_W);
  const wanted = Math.ceil((widest + LABEL_W + 200) / 2000) * 2000;
  if (wanted > spaceW) { spaceW = wanted; space.style.width = wanted + 'px'; }
  placeLens();
  if (more) redraw();
}
function wallScrolled() {
  viewTop = wall.scrollTop; viewLeft = wall.scrollLeft;
  redraw();
}
wall.addEventListener('scroll', wallScrolled, {passive: true});
new ResizeObserver(() => { viewH = wall.clientHeight; viewW = wall.clientWidth; redraw(); }).observe(wall);

// --- the minimap: every token of every row, a few pixels each, in the wall's order ----------------
const MAP_H = 480, CELL_W = 3;
let mapRowH = 2, mapCols = 0, mapCssH = 0;
function mapContext() {
  if (view !== 'wall' || M.n === 0) return null;
  const longest = M.T.reduce((a, t) => Math.max(a, t.length), 0);
  const cols = Math.max(64, Math.ceil(longest / 64) * 64);
  const rowH = Math.max(1, Math.min(6, Math.floor(MAP_H / M.n)));
  if (rowH !== mapRowH || canvas.height !== M.n * rowH) {
    mapCols = cols; mapRowH = rowH;
    canvas.width = cols * CELL_W; canvas.height = M.n * rowH;
    mapCssH = Math.min(M.n * rowH, MAP_H);  // n=1024: one pixel a row, squeezed
    canvas.style.height = mapCssH + 'px';
    mapDirty = true;
  } else if (cols !== mapCols) {  // longer rows: the cells drawn so far are copied, not drawn again
    const old = document.createElement('canvas');
    old.width = canvas.width; old.height = canvas.height;
    if (!mapDirty) old.getContext('2d').drawImage(canvas, 0, 0);
    mapCols = cols; canvas.width = cols * CELL_W;
    if (!mapDirty) canvas.getContext('2d').drawImage(old, 0, 0);
  }
  return canvas.getContext('2d');
}
function mapColour(i, p) {
  const lp = M.L[i][p];
  if (lp === null || lp === undefined) return NEUTRAL;
  if (colour === 'e') { const e = M.E[i][p]; return e === null || e === undefined ? NEUTRAL : ENTR[bucket(e, ENTROPY_STEP)]; }
  return PROB[bucket(Math.exp(lp), 0.1)];
}
function mapCell(ctx, i, p) {
  ctx.fillStyle = mapColour(i, p);
  ctx.fillRect(p * CELL_W, M.rank[i] * mapRowH, CELL_W, mapRowH);
}
function drawMap(ctx) {  // every cell, one path per colour (a fillStyle per cell costs more than the cells)
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const paths = new Map();
  for (let i = 0; i < M.n; i++) {
    const y = M.rank[i] * mapRowH;
    for (let p = 0; p < M.T[i].length; p++) {
      const c = mapColour(i, p);
      let path = paths.get(c);
      if (!path) { path = new Path2D(); paths.set(c, path); }
      path.rect(p * CELL_W, y, CELL_W, mapRowH);
    }
    mapDone[i] = M.T[i].length;
  }
  for (const [c, path] of paths) { ctx.fillStyle = c; ctx.fill(path); }
  mapDirty = false;
}
function placeLens() {  // the rows in view, on the map: from what is known, no layout read
  const total = Math.max(1, M.n * rowH);
  lens.style.top = (viewTop / total * mapCssH).toFixed(1) + 'px';
  lens.style.height = Math.max(4, Math.min(viewH, total) / total * mapCssH).toFixed(1) + 'px';
}
function mapJump(e) {
  const box = canvas.getBoundingClientRect();
  const rank = Math.floor((e.clientY - box.top) / box.height * M.n);
  wall.scrollTop = Math.max(0, rank * rowH - viewH / 2);
}
canvas.addEventListener('mousedown', (e) => {
  mapJump(e);
  const move = (ev) => mapJump(ev), up = () => { window.removeEventListener('mousemove', move); window.removeEventListener('mouseup', up); };
  window.addEventListener('mousemove', move); window.addEventListener('mouseup', up);
});
