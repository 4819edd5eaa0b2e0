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
# a Markdown component or a toast (a line this module was not asked to write) loses what makes it
# act: a javascript:, vbscript: or data: link target, a form, a fixed overlay. Cheap per change: a
# node is looked into only when it is, or holds, such a container (the token wall's spans are not).
GUARD_JS = r"""
() => {
  const HOSTS = '.prose, [data-testid="toast-text"], .toast-body';
  const ACTIVE = /^(javascript|vbscript|data):/i;
  const clean = (host) => {
    for (const el of [host, ...host.querySelectorAll('*')]) {
      for (const name of ['href', 'xlink:href', 'action', 'formaction']) {
        const target = el.getAttribute(name);
        if (target !== null && ACTIVE.test(target.replace(/[\u0000-\u0020]/g, ''))) el.removeAttribute(name);
      }
      const style = el.getAttribute('style') || '';
      if (el.tagName === 'FORM' || /position\s*:\s*fixed/i.test(style)) el.remove();
    }
  };
  const look = (node) => {
    if (!(node instanceof Element)) return;
    const host = node.closest(HOSTS);
    if (host) { clean(node); return; }
    if (node.firstElementChild) node.querySelectorAll(HOSTS).forEach(clean);
  };
  new MutationObserver((changes) => {
    for (const change of changes) change.addedNodes.forEach(look);
  }).observe(document.body, {childList: true, subtree: true});
  document.querySelectorAll(HOSTS).forEach(clean);
}
"""
