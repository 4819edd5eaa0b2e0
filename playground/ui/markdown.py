"""Text from outside the app in the page's Markdown: a prompt's stop strings, a run's error, a
file's name, a link's parameters, a value a refusal quotes. Gradio's sanitizer removes scripts and
event handlers but keeps SVG links with ``javascript:`` targets, fixed-position overlays, forms and
remote images, so such text is written as text here, never as markup: a person's run, or a link to
it, must not run another's code or draw over their page."""

from __future__ import annotations

import html
import re

# What Markdown reads as markup once "<" and "&" are written as entities: links and images (an
# escaped "[" opens neither), code spans (a backtick ends one early) and the escapes themselves.
_MARKUP = re.compile(r"([\\`\[])")
_SPAN = re.compile(r"`([^`\n]+)`")


def _text(text: object) -> str:
    return _MARKUP.sub(r"\\\1", html.escape(str(text), quote=False))


def plain(text: object) -> str:
    """``text`` as the page shows it, character for character, in any Markdown component; a pair
    of backticks in it (a sentence of ours naming `python app.py`) still sets its words as code."""
    escaped = html.escape(str(text), quote=False).replace("\\", "\\\\").replace("[", "\\[")
    return _SPAN.sub(r"<code>\1</code>", escaped).replace("`", "\\`")


def code(text: object) -> str:
    """``text`` in code type (as a backtick span would set it), whatever characters it holds."""
    return f"<code>{_text(text)}</code>"


def toast(text: object) -> str:
    """``text`` for a toast (gr.Warning, gr.Error), which the page writes as HTML, not Markdown."""
    return html.escape(str(text), quote=False)


# Behind the escaping above, in the browser: markup a run's or a file's words might still carry into
# a Markdown line or a toast (one this module was not asked to write) is taken out as it appears:
# what loads or acts (images, media, frames, forms and their controls, SVG), any box the page would
# draw fixed or sticky over others (its computed style: "f\69xed" is fixed too), a background from
# elsewhere, and link targets that are not web addresses. The page's own Markdown holds none of
# these. Only Markdown lines (".md") and toasts are looked into: never the samples area or a chart.
GUARD_JS = r"""
() => {
  const HOSTS = '.md, [data-testid="toast-text"]';
  const ACTIVE = 'img, image, svg, video, audio, source, picture, iframe, frame, object, embed, form, input, button, '
    + 'textarea, select, style, link, meta, base';
  const SAFE_LINK = /^(https?:|mailto:|#|\/|\.|[^:]*$)/i;
  const clean = (host) => {
    host.querySelectorAll(ACTIVE).forEach((el) => el.remove());
    for (const el of host.querySelectorAll('*')) {
      const target = el.getAttribute('href') ?? el.getAttribute('xlink:href');
      if (target !== null && !SAFE_LINK.test(target.replace(/[\u0000-\u0020]/g, ''))) {
        el.removeAttribute('href');
        el.removeAttribute('xlink:href');
      }
      if (!el.hasAttribute('style')) continue;
      const position = getComputedStyle(el).position;
      if (position === 'fixed' || position === 'sticky' || /url\s*\(/i.test(el.getAttribute('style'))) el.remove();
    }
  };
  // Each host a batch of changes touched, cleaned once (a line drawn anew adds many nodes at once).
  const hosts = (node, found) => {
    if (!(node instanceof Element)) return;
    const host = node.closest(HOSTS);
    if (host) found.add(host);
    else if (node.firstElementChild) node.querySelectorAll(HOSTS).forEach((h) => found.add(h));
  };
  new MutationObserver((changes) => {
    const found = new Set();
    for (const change of changes) change.addedNodes.forEach((node) => hosts(node, found));
    found.forEach(clean);
  }).observe(document.body, {childList: true, subtree: true});
  document.querySelectorAll(HOSTS).forEach(clean);
}
"""
