"""Maps drawn on a canvas in the browser: a Streamlit component (components v2, inline HTML, CSS
and JS, no build step) that draws a `render.MapSet` with no plotly.

One attention or bias map, or a set of them (every head of a layer), with a title that wraps, a
colour bar under the maps (in view at any width) and a hover that names the query, the key and
the value. A set opens as a grid that reflows to its box (4 columns on a laptop, 2 on a phone);
a head's button, or a click on its panel, draws that head alone, in the browser: the server
sends a layer's maps once, as 8-bit codes at display resolution, deflated, and a head switch
sends nothing back (no rerun). "PNG" saves what is drawn, title and colour bar included.

    data = canvas_maps.data(maps, filename="attention_L1")   # cache this (a few hundred kB)
    canvas_maps.show(data, key="mh_fig_grid_canvas")

Floats never travel: a 2,048-token layer of 8 heads at 273 px a side is 600 kB of codes, about
a fifth of that deflated (what bertviz's float JSON could not do past a few hundred tokens).
"""

from __future__ import annotations

import base64
import hashlib
import zlib

import numpy as np
import streamlit as st

from alibi_viz import i18n
from alibi_viz.figures.render import MASK_RGB, MapSet, color_table
from alibi_viz.i18n import _

TOKEN_CHARS = 12            # a token's hover label is cut to this many characters
TOKEN_LABELS_MAX = 8192     # beyond this many positions the hover names positions alone
GRID_PANEL_PX = 150         # the grid puts as many columns as fit panels this wide, at most 4
GRID_COLUMNS_MAX = 4

CSS = """
:host { display: block; }
.avm { position: relative; font-family: inherit; font-size: 14px; color: #262730;
       max-width: 100%; }
.avm-title { margin: 0 0 6px; font-size: 15px; overflow-wrap: anywhere; }
.avm-tabs { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
.avm-tabs button { font: inherit; font-size: 13px; min-width: 32px; padding: 3px 8px;
  border: 1px solid #b9b9c0; border-radius: 6px; background: #fff; color: #262730;
  cursor: pointer; }
.avm-tabs button[aria-pressed="true"] { background: #1c4e80; border-color: #1c4e80;
  color: #fff; }
.avm-tabs .avm-save { margin-left: auto; }
.avm-grid { display: grid; gap: 10px 8px; }
/* a column: a caption that wraps pushes its own map down, and the row's other maps with it */
.avm-panel { min-width: 0; cursor: pointer; display: flex; flex-direction: column; }
.avm-panel .avm-cap { flex: 1 0 auto; }
.avm-cap { font-size: 12px; line-height: 1.25; margin-bottom: 2px; overflow-wrap: anywhere; }
.avm canvas.avm-map { display: block; width: 100%; aspect-ratio: 1 / 1; touch-action: pan-y; }
.avm-one { max-width: 560px; }
.avm-bar { margin-top: 8px; max-width: 480px; }
.avm-bar-title { font-size: 12px; margin-bottom: 2px; }
.avm-bar canvas { display: block; width: 100%; height: 12px; }
.avm-ticks { position: relative; height: 16px; font-size: 11px; }
.avm-ticks span { position: absolute; top: 1px; white-space: nowrap; }
.avm-tip { position: absolute; z-index: 5; pointer-events: none; background: #fff;
  border: 1px solid #8a8886; border-radius: 4px; padding: 3px 6px; font-size: 12px;
  line-height: 1.35; white-space: pre-wrap; max-width: 85%; box-shadow: 0 1px 4px rgba(0,0,0,.2); }
[hidden] { display: none !important; }
"""

JS = r"""
const instances = new WeakMap();   // parentElement -> the instance drawn there
const decoded = new Map();         // digest -> Promise of the codes (Uint8Array)
const chosen = new Map();          // data.id -> {mode, head}: kept when Streamlit remounts

function inflate(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Response(stream).arrayBuffer().then((buffer) => new Uint8Array(buffer));
}

function codesOf(data) {
  if (!decoded.has(data.digest)) {
    decoded.set(data.digest, inflate(data.codes));
    while (decoded.size > 8) decoded.delete(decoded.keys().next().value);
  }
  return decoded.get(data.digest);
}

function el(tag, cls, parent) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (parent) parent.appendChild(node);
  return node;
}

// One panel's codes as an offscreen canvas of R x C pixels, coloured through the table
// (255: the mask's grey).
function bitmap(data, codes, k) {
  const {rows: R, cols: C} = data;
  const lut = new Uint8Array(257 * 3);
  for (let i = 0; i < 256; i++)
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = parseInt(data.lut.substr(i * 6 + c * 2, 2), 16);
  const canvas = document.createElement('canvas');
  canvas.width = C; canvas.height = R;
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(C, R);
  const px = image.data, base = k * R * C;
  for (let p = 0; p < R * C; p++) {
    const code = codes[base + p];
    const at = code === 255 ? 256 : Math.round(code * 255 / 254);
    const rgb = at === 256 ? data.mask : [lut[at * 3], lut[at * 3 + 1], lut[at * 3 + 2]];
    px[p * 4] = rgb[0]; px[p * 4 + 1] = rgb[1]; px[p * 4 + 2] = rgb[2]; px[p * 4 + 3] = 255;
  }
  ctx.putImageData(image, 0, 0);
  return canvas;
}

class Maps {
  constructor(parent) {
    this.parent = parent;
    this.root = el('div', 'avm', null);
    parent.appendChild(this.root);
    this.title = el('p', 'avm-title', this.root);
    this.tabs = el('div', 'avm-tabs', this.root);
    this.tabs.setAttribute('role', 'toolbar');
    this.grid = el('div', 'avm-grid', this.root);
    this.one = el('div', 'avm-one', this.root);
    this.oneCap = el('div', 'avm-cap', this.one);
    this.oneCanvas = el('canvas', 'avm-map', this.one);
    this.bar = el('div', 'avm-bar', this.root);
    this.barTitle = el('div', 'avm-bar-title', this.bar);
    this.barCanvas = el('canvas', null, this.bar);
    this.ticks = el('div', 'avm-ticks', this.bar);
    this.tip = el('div', 'avm-tip', this.root);
    this.tip.hidden = true;
    this.bitmaps = [];
    this.queued = false;
    this.resize = new ResizeObserver(() => this.queue());
    this.resize.observe(this.root);
    this.hover(this.oneCanvas, () => this.head);
  }

  update(data) {
    const same = this.data && this.data.digest === data.digest &&
                 this.data.title === data.title && this.data.lang === data.lang;
    const asked = this.data && (this.data.mode !== data.mode || this.data.selected !== data.selected);
    this.data = data;
    if (same && !asked) return;
    const kept = chosen.get(data.id);
    const fits = (h) => Number.isInteger(h) && h >= 0 && h < data.panels;
    if (asked || !kept || !fits(kept.head)) {
      this.mode = data.panels > 1 ? data.mode : 'one';
      this.head = fits(data.selected) ? data.selected : 0;
    } else {
      this.mode = data.panels > 1 ? kept.mode : 'one';
      this.head = kept.head;
    }
    this.build();
    codesOf(data).then((codes) => {
      if (this.data !== data) return;  // newer data arrived meanwhile
      this.codes = codes;
      this.bitmaps = [];
      for (let k = 0; k < data.panels; k++) this.bitmaps.push(bitmap(data, codes, k));
      this.draw();
    });
  }

  build() {
    const data = this.data;
    this.title.textContent = data.title;
    this.tabs.replaceChildren();
    this.tabs.hidden = data.panels < 2 && !data.filename;
    if (data.panels > 1) {
      const all = el('button', null, this.tabs);
      all.textContent = data.texts.all;
      all.dataset.head = 'all';
      all.onclick = () => this.choose('grid', this.head);
      data.panel_titles.forEach((title, k) => {
        const button = el('button', null, this.tabs);
        button.textContent = String(k + 1);
        button.title = title;
        button.setAttribute('aria-label', title);
        button.dataset.head = String(k);
        button.onclick = () => this.choose('one', k);
      });
    }
    if (data.filename) {
      const save = el('button', 'avm-save', this.tabs);
      save.textContent = 'PNG';
      save.title = data.texts.save;
      save.setAttribute('aria-label', data.texts.save);
      save.onclick = () => this.save();
    }
    this.grid.replaceChildren();
    this.panels = data.panel_titles.map((title, k) => {
      const panel = el('div', 'avm-panel', this.grid);
      el('div', 'avm-cap', panel).textContent = title;
      const canvas = el('canvas', 'avm-map', panel);
      canvas.style.aspectRatio = `1 / ${this.ratio()}`;
      canvas.setAttribute('role', 'img');
      canvas.setAttribute('aria-label', title);
      panel.onclick = () => { if (data.panels > 1) this.choose('one', k); };
      this.hover(canvas, () => k);
      return canvas;
    });
    this.oneCanvas.style.aspectRatio = `1 / ${this.ratio()}`;
    this.barTitle.textContent = data.bar_title;
    this.barCanvas.width = 256; this.barCanvas.height = 1;
    const ctx = this.barCanvas.getContext('2d');
    const line = ctx.createImageData(256, 1);
    for (let i = 0; i < 256; i++) {
      for (let c = 0; c < 3; c++) line.data[i * 4 + c] = parseInt(data.lut.substr(i * 6 + c * 2, 2), 16);
      line.data[i * 4 + 3] = 255;
    }
    ctx.putImageData(line, 0, 0);
    this.ticks.replaceChildren();
    for (const [at, label] of data.ticks) {
      const tick = el('span', null, this.ticks);
      tick.textContent = label;
      tick.style.left = `${at * 100}%`;
      tick.style.transform = at < 0.02 ? 'none' : at > 0.98 ? 'translateX(-100%)' : 'translateX(-50%)';
    }
    this.show();
  }

  choose(mode, head) {
    this.mode = mode;
    this.head = head;
    chosen.set(this.data.id, {mode, head});
    this.tip.hidden = true;
    this.show();
    this.draw();
  }

  show() {
    const grid = this.mode === 'grid';
    this.grid.hidden = !grid;
    this.one.hidden = grid;
    this.oneCap.textContent = this.data.panel_titles[this.head] || '';
    this.oneCanvas.setAttribute('role', 'img');
    this.oneCanvas.setAttribute('aria-label', this.oneCap.textContent);
    for (const button of this.tabs.querySelectorAll('button[data-head]')) {
      const on = grid ? button.dataset.head === 'all' : button.dataset.head === String(this.head);
      button.setAttribute('aria-pressed', String(on));
    }
    this.root.dataset.mode = this.mode;
    this.root.dataset.head = String(this.head);
  }

  // A panel's height over its width: a strip of few queries against many keys (a decoding
  // step) is drawn a quarter as tall as wide, so that it stays visible.
  ratio() {
    return Math.max(this.data.rows / this.data.cols, 0.25);
  }

  columns() {
    const fit = Math.floor(this.root.clientWidth / this.data.panel_px);
    return Math.max(1, Math.min(this.data.columns_max, this.data.panels, fit));
  }

  queue() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => { this.queued = false; this.draw(); });
  }

  draw() {
    if (!this.data || this.bitmaps.length !== this.data.panels) return;
    this.grid.style.gridTemplateColumns = `repeat(${this.columns()}, minmax(0, 1fr))`;
    if (this.mode === 'grid') this.panels.forEach((canvas, k) => this.paint(canvas, k));
    else this.paint(this.oneCanvas, this.head);
    this.root.dataset.drawn = String((Number(this.root.dataset.drawn) || 0) + 1);
    if (this.root.dataset.drawn === '1') {
      performance.mark('alibi-viz:maps-drawn');  // bench_phone
      // outside the shadow root, for the page's script that waits for its first figure (ui.py)
      const host = this.parent.getRootNode().host || this.parent;
      host.dataset.avmDrawn = '1';
    }
  }

  // Panel k on `canvas` at its shown size in device pixels (pixels stay crisp), with the
  // training length dashed.
  paint(canvas, k, ctx = null, box = null) {
    const dpr = window.devicePixelRatio || 1;
    let x = 0, y = 0, w, h;
    if (box) { [x, y, w, h] = box; } else {
      const shown = canvas.clientWidth;
      if (!shown) return;
      w = Math.round(shown * dpr);
      h = Math.round(w * this.ratio());
      if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
      ctx = canvas.getContext('2d');
    }
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.bitmaps[k], x, y, w, h);
    const m = this.data.marker;
    if (m) {
      const T = this.data.seq_len, K = this.data.key_len || T;
      const mx = x + m / K * w, my = y + (m - (K - T)) / T * h;
      ctx.save();
      ctx.strokeStyle = 'red';
      ctx.lineWidth = Math.max(1, 1.5 * dpr);
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(mx, y); ctx.lineTo(mx, y + h);
      ctx.moveTo(x, my); ctx.lineTo(x + w, my);
      ctx.stroke();
      ctx.restore();
    }
  }

  // What pixel (r, c) of panel k covers and holds, one line each.
  describe(k, r, c) {
    const d = this.data, T = d.seq_len, K = d.key_len || T, t = d.texts;
    // the positions pixel p of n covers out of L (from `offset`), or the one it was sampled at
    const span = (p, n, L, offset) => {
      if (d.sampled) { const at = Math.floor((p + 0.5) * L / n) + offset; return [at, at]; }
      return [Math.floor(p * L / n) + offset, Math.ceil((p + 1) * L / n) - 1 + offset];
    };
    const name = (i) => (d.tokens && d.tokens[i] !== undefined ? ` «${d.tokens[i]}»` : '');
    const where = (label, [a, b]) => (a === b ? `${label}=${a}${name(a)}` : `${label}=${a}–${b}`);
    const rows = span(r, d.rows, T, K - T), cols = span(c, d.cols, K, 0);
    const code = this.codes[(k * d.rows + r) * d.cols + c];
    const fmt = new Intl.NumberFormat(d.lang, {maximumSignificantDigits: 3});
    let value;
    if (code === 255) value = t.masked;
    else {
      const v = d.vmin + code / 254 * (d.vmax - d.vmin);
      const shown = (d.reads === 'log10' ? 10 ** v : v) * (d.panel_scales ? d.panel_scales[k] : 1);
      const text = shown !== 0 && Math.abs(shown) < 1e-3
        ? shown.toExponential(1).replace('.', fmt.format(1.5).charAt(1)) : fmt.format(shown);
      value = `${d.value_label} ${code === 0 ? '≤' : '≈'} ${text}`;
      if (rows[0] !== rows[1] || cols[0] !== cols[1]) value += ` (${t.block})`;
    }
    const lines = [];
    if (d.panels > 1) lines.push(d.panel_titles[k]);
    lines.push(where(t.query, rows), where(t.key, cols));
    if (rows[0] === rows[1] && cols[0] === cols[1]) lines.push(`${t.distance}=${rows[0] - cols[0]}`);
    lines.push(value);
    return lines.join('\n');
  }

  hover(canvas, panel) {
    const at = (event) => {
      if (!this.codes) return;
      const box = canvas.getBoundingClientRect();
      const fx = (event.clientX - box.left) / box.width, fy = (event.clientY - box.top) / box.height;
      if (fx < 0 || fy < 0 || fx >= 1 || fy >= 1) { this.tip.hidden = true; return; }
      const r = Math.floor(fy * this.data.rows), c = Math.floor(fx * this.data.cols);
      this.tip.textContent = this.describe(panel(), r, c);
      this.tip.hidden = false;
      const root = this.root.getBoundingClientRect();
      const left = Math.min(event.clientX - root.left + 12, root.width - this.tip.offsetWidth);
      this.tip.style.left = `${Math.max(0, left)}px`;
      this.tip.style.top = `${event.clientY - root.top + 14}px`;
    };
    canvas.addEventListener('pointermove', at);
    canvas.addEventListener('pointerdown', at);
    canvas.addEventListener('pointerleave', () => { this.tip.hidden = true; });
  }

  // What is drawn, as a PNG file: the title, the panels as shown and the colour bar, at 2x.
  save() {
    const d = this.data, scale = 2, pad = 10;
    const grid = this.mode === 'grid';
    const width = grid ? Math.max(320, this.root.clientWidth) : Math.min(560, Math.max(320, this.root.clientWidth));
    const shown = grid ? [...d.panel_titles.keys()] : [this.head];
    const columns = grid ? this.columns() : 1;
    const gap = 10, capPx = 16;
    const side = (width - gap * (columns - 1)) / columns, tall = side * this.ratio();
    const font = (px) => `${px}px sans-serif`;
    const probe = document.createElement('canvas').getContext('2d');
    probe.font = font(15);
    const lines = [];
    let line = '';
    for (const word of d.title.split(' ')) {
      const next = line ? `${line} ${word}` : word;
      if (line && probe.measureText(next).width > width) { lines.push(line); line = word; } else line = next;
    }
    if (line) lines.push(line);
    const top = lines.length * 20 + 6;
    const rows = Math.ceil(shown.length / columns);
    const height = top + rows * (tall + capPx + gap) + 50;
    const out = document.createElement('canvas');
    out.width = Math.round((width + 2 * pad) * scale); out.height = Math.round((height + 2 * pad) * scale);
    const ctx = out.getContext('2d');
    ctx.scale(scale, scale);
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, width + 2 * pad, height + 2 * pad);
    ctx.translate(pad, pad);
    ctx.fillStyle = '#262730'; ctx.textBaseline = 'top';
    ctx.font = font(15);
    lines.forEach((text, i) => ctx.fillText(text, 0, i * 20));
    ctx.font = font(12);
    shown.forEach((k, n) => {
      const x = (n % columns) * (side + gap), y = top + Math.floor(n / columns) * (tall + capPx + gap);
      ctx.fillStyle = '#262730';
      ctx.fillText(d.panel_titles[k], x, y, side);
      this.paint(null, k, ctx, [x, y + capPx, side, tall]);
    });
    const barY = top + rows * (tall + capPx + gap), barW = Math.min(width, 480);
    ctx.fillStyle = '#262730';
    ctx.fillText(d.bar_title, 0, barY);
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(this.barCanvas, 0, barY + 16, barW, 12);
    ctx.font = font(11);
    for (const [at, label] of d.ticks) {
      const w = ctx.measureText(label).width;
      ctx.fillText(label, Math.min(Math.max(0, at * barW - w / 2), barW - w), barY + 31);
    }
    out.toBlob((blob) => {
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = `${d.filename}.png`;
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    }, 'image/png');
  }

  destroy() {
    this.resize.disconnect();
    this.root.remove();
  }
}

export default function (component) {
  const {data, parentElement} = component;
  let maps = instances.get(parentElement);
  if (!maps) {
    maps = new Maps(parentElement);
    instances.set(parentElement, maps);
  }
  maps.update(data);
  return () => {
    maps.destroy();
    instances.delete(parentElement);
  };
}
"""

_COMPONENT = st.components.v2.component("alibi_viz_canvas_maps", css=CSS, js=JS)


def _short(token: str) -> str:
    return token if len(token) <= TOKEN_CHARS else token[:TOKEN_CHARS - 1] + "…"


def data(maps: MapSet, *, filename: str, mode: str = "grid", selected: int = 0,
         panel_px: int = GRID_PANEL_PX, columns_max: int = GRID_COLUMNS_MAX) -> dict:
    """What the component draws, as plain JSON: the codes deflated and base64-encoded, the
    colour table, the titles and the hover's labels in the page's language, the token labels
    cut to TOKEN_CHARS (none past TOKEN_LABELS_MAX positions). mode: "grid" (every panel) or
    "one" (panel `selected`, 0-based); `filename`: the saved PNG's name, without ".png". The
    grid puts as many columns as fit panels `panel_px` wide, at most `columns_max`."""
    codes = np.ascontiguousarray(maps.codes, dtype=np.uint8)
    panels, rows, cols = codes.shape
    digest = hashlib.blake2b(codes.data, digest_size=12)
    # everything a redraw depends on beyond the title: the browser redraws when this changes
    digest.update(repr((codes.shape, maps.vmin, maps.vmax, maps.colorscale, maps.panel_titles,
                        maps.panel_scales, maps.key_len, maps.sampled, maps.bar_title,
                        maps.ticks, maps.marker)).encode())
    tokens = ([_short(t) for t in maps.tokens]
              if maps.tokens and maps.seq_len <= TOKEN_LABELS_MAX else None)
    return {
        "id": filename, "digest": digest.hexdigest(),
        "panels": panels, "rows": rows, "cols": cols, "seq_len": maps.seq_len,
        "codes": base64.b64encode(zlib.compress(codes.tobytes(), 6)).decode("ascii"),
        "vmin": maps.vmin, "vmax": maps.vmax, "reads": maps.reads,
        "lut": color_table(maps.colorscale).tobytes().hex(), "mask": list(MASK_RGB),
        "title": maps.title, "panel_titles": list(maps.panel_titles),
        "bar_title": maps.bar_title, "ticks": [[float(at), label] for at, label in maps.ticks],
        "value_label": maps.value_label, "tokens": tokens, "marker": maps.marker,
        "key_len": maps.key_len, "sampled": maps.sampled,
        "panel_scales": None if maps.panel_scales is None else [float(s) for s in maps.panel_scales],
        "mode": mode, "selected": int(selected), "filename": filename,
        "panel_px": panel_px, "columns_max": columns_max, "lang": i18n.get_language(),
        "texts": {"all": _("All heads"), "save": _("Save as PNG"), "query": _("query i"),
                  "key": _("key j"), "distance": _("distance i-j"), "masked": _("masked"),
                  "block": _("highest in its block")},
    }


def show(payload: dict, key: str) -> None:
    """Draw `data(...)`'s payload in the page, as wide as its container, as tall as it needs."""
    _COMPONENT(data=payload, key=key, width="stretch", height="content")
