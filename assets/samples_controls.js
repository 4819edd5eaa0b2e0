// The samples area, what a person does in it: the view switches, a click on a sample or a token,
// the Set and Graph tabs' marks, and the hover tip. It runs after assets/samples.js in one
// js_on_load body (playground/ui/samples_area.py joins the two), and shares its names.
// --- views and switches ---------------------------------------------------------------------------
// (each switch says which of its buttons is on to a screen reader too, not by its colour alone)
const pressed = (b, on) => { b.classList.toggle('on', on); b.setAttribute('aria-pressed', String(on)); };
function setView(v) {
  if (v !== 'columns' && v !== 'wall') return;
  view = v;
  root.dataset.view = v;
  for (const b of bar.querySelectorAll('[data-view]')) pressed(b, b.dataset.view === v);
  if (v === 'wall') { mapDirty = true; }
  frame();
}
const legend = bar.querySelector('.sa-legend');  // the colours' key, in words at both ends
function setColour(c) {
  colour = c;
  const [low, palette, high] = c === 'e' ? ['0 bits', ENTR, `\u2265 ${(ENTROPY_STEP * 9).toFixed(2)} bits`] :
    ['p 0 (unlikely)', PROB, 'p 1 (likely)'];
  legend.innerHTML = `${low} <i style="background:linear-gradient(to right, ${palette.join(',')})"></i> ${high}`;
  wall.classList.toggle('by-p', c === 'p'); wall.classList.toggle('by-e', c === 'e');
  for (const b of bar.querySelectorAll('[data-colour]')) pressed(b, b.dataset.colour === c);
  mapDirty = true; frame();
}
function setCells(c) {
  wall.classList.toggle('blocks', c === 'blocks');
  rowH = c === 'blocks' ? 11 : 16;
  for (const r of live.values()) {  // a cell's width differs between text and blocks: re-measure
    r.top = -1; r.w = LABEL_W;
    for (let p = 0; p < r.done; p++) r.w += cellW(Number(r.row.dataset.i), p);
  }
  spaceH = -1; spaceW = 0; redraw();
  for (const b of bar.querySelectorAll('[data-cells]')) pressed(b, b.dataset.cells === c);
}
bar.addEventListener('click', (e) => {
  const b = e.target.closest('button');
  if (!b) return;
  if (b.dataset.view) { chosenView = b.dataset.view; setView(b.dataset.view); }
  if (b.dataset.colour) setColour(b.dataset.colour);
  if (b.dataset.cells) setCells(b.dataset.cells);
});
setColour('p'); setCells('text'); setView(props.view === 'wall' ? 'wall' : 'columns');

// --- a click selects a sample; the page hears it as the component's select event ------------------
// (a token cell of the wall also says its position: the Branch tab starts there)
function select(i, token) {
  if (selected !== null && cards[selected]) cards[selected].card.classList.remove('sel');
  if (selected !== null && live.has(selected)) live.get(selected).row.classList.remove('sel');
  selected = i;
  if (cards[i]) cards[i].card.classList.add('sel');
  if (live.has(i)) live.get(i).row.classList.add('sel');
  trigger('select', {index: i, value: {sample: i, token: token}, selected: true});
}
// --- the Set tab's bar click marks its answer group's samples (a 'sa-mark' event with their indices) --
document.addEventListener('sa-mark', (e) => {
  marked = new Set((e.detail || []).filter((i) => i >= 0 && i < M.n));
  cards.forEach((c, i) => c.card.classList.toggle('mk', marked.has(i)));
  for (const [i, r] of live) r.row.classList.toggle('mk', marked.has(i));
  root.dataset.marked = marked.size;
});
const tokenAt = (cell) => {  // a wall cell's position: its segment's place in the row, then its own
  const seg = cell.parentNode;
  return Array.prototype.indexOf.call(seg.parentNode.children, seg) * SEGMENT + Array.prototype.indexOf.call(seg.children, cell);
};
root.addEventListener('click', (e) => {
  const target = e.target.closest('.sa-row, .sa-card');
  if (!target || !root.contains(target)) return;
  const cell = e.target.closest('.sa-row .tk');
  select(Number(target.dataset.i), cell ? tokenAt(cell) : null);
});

// --- hover: the token, its probability, and the top-k at its position -----------------------------
const esc = (s) => s.replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
wall.addEventListener('mouseover', (e) => {
  const cell = e.target.closest('.tk');
  if (!cell) { tip.hidden = true; return; }
  const i = Number(cell.parentNode.parentNode.parentNode.dataset.i), p = tokenAt(cell);
  const text = M.T[i][p], lp = M.L[i][p], top = M.K[i][p], h = M.E[i][p];
  let html = `<div class="sa-tip-head"><b>${esc(visible(text))}</b> <span>#${i} \u00b7 token ${p}</span></div>`;
  if (lp === null || lp === undefined) html += '<div>no logprobs recorded</div>';
  else {
    html += `<div>p = ${prob(lp).toFixed(3)}` +
      (h === null || h === undefined ? '' : ` \u00b7 <span class="sa-entropy">entropy \u2265 ${h.toFixed(2)} bits</span>`) + '</div>';
    if (top && top.length) {
      html += '<table class="sa-topk">';
      // The sampled token's row: the one with its log-probability (rounded alike) and its text, else
      // the first with its log-probability (texts repeat in the parts of characters, and differ from
      // the piece shown where a token completes a character; tokens tie in bf16).
      let mine = -1;
      for (let j = 0; j < top.length && mine < 0; j += 2) if (top[j + 1] === lp && top[j] === text) mine = j;
      for (let j = 0; j < top.length && mine < 0; j += 2) if (top[j + 1] === lp) mine = j;
      for (let j = 0; j < top.length; j += 2) {
        html += `<tr${j === mine ? ' class="mine"' : ''}><td>${esc(visible(top[j]))}</td><td>${Math.exp(top[j + 1]).toFixed(3)}</td></tr>`;
      }
      html += '</table>';
    }
  }
  tip.innerHTML = html;
  tip.hidden = false;
  const box = cell.getBoundingClientRect();
  tip.style.left = Math.min(window.innerWidth - 260, box.left) + 'px';
  tip.style.top = (box.bottom + 4) + 'px';
  const high = tip.getBoundingClientRect().height;  // no room below the cell: above it
  if (box.bottom + 4 + high > window.innerHeight && box.top - 4 - high >= 0) tip.style.top = (box.top - 4 - high) + 'px';
});
wall.addEventListener('mouseleave', () => { tip.hidden = true; });
// A touch opens the tip with no mouse to leave: a scroll, or a touch anywhere else, closes it.
window.addEventListener('scroll', () => { tip.hidden = true; }, {capture: true, passive: true});
document.addEventListener('touchstart', (e) => { if (!wall.contains(e.target)) tip.hidden = true; }, {passive: true});

watch('value', () => { if (props.value) receive(props.value); });
if (props.value) receive(props.value);
