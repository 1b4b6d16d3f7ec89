"""Output that prints in any locale: what a terminal's encoding lacks (PYTHONIOENCODING=ascii, a latin-1 locale) becomes an
ASCII stand-in instead of ending the run in UnicodeEncodeError.

The commands call `ensure_encodable_output()` before they print; a Python caller printing a report's screens
(`specagent.reports.screens`) in such a terminal calls it too.
"""

from __future__ import annotations

#: ASCII stand-ins for the non-ASCII characters the commands print, for a terminal that cannot encode them
#: (PYTHONIOENCODING=ascii, a latin-1 locale): the output stays readable instead of ending in UnicodeEncodeError.
ASCII_FALLBACK = {"—": "-", "–": "-", "…": "...", "×": "x", "≤": "<=", "≥": ">=", "≈": "~", "→": "->", "←": "<-", "²": "2",
                  "³": "3", "τ": "tau", "µ": "u", "μ": "u", "±": "+/-", "·": "*", "÷": "/", "−": "-", "‘": "'", "’": "'",
                  "“": '"', "”": '"', "•": "*", "✓": "ok", "✗": "x", "∞": "inf", "√": "sqrt", "Δ": "d", "α": "alpha",
                  "β": "beta", "σ": "sigma", "λ": "lambda", "ρ": "rho", "≠": "!=", "°": "deg", "€": "EUR", "\u00a0": " "}


def ascii_fallback(err: UnicodeError) -> tuple[str, int]:
    """A codec error handler: each character the stream cannot encode becomes its ASCII stand-in ('?' if none)."""
    import unicodedata

    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = []
    for ch in err.object[err.start:err.end]:
        if ch in ASCII_FALLBACK:
            out.append(ASCII_FALLBACK[ch])
            continue
        name = unicodedata.name(ch, "")
        if name.startswith(("BOX DRAWINGS", "HEAVY", "LIGHT")):
            out.append("-" if "HORIZONTAL" in name and "VERTICAL" not in name else "|" if "VERTICAL" in name and
                       "HORIZONTAL" not in name else "+")
        else:
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(plain or "?")
    return "".join(out), err.end


def ensure_encodable_output() -> None:
    """Let stdout and stderr print every character in any locale: what the encoding lacks becomes ASCII (`ASCII_FALLBACK`)."""
    import codecs
    import sys

    try:
        codecs.lookup_error("specagent-ascii")
    except LookupError:
        codecs.register_error("specagent-ascii", ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if enc in ("utf8", "utf16", "utf32", "utf8sig") or not hasattr(stream, "reconfigure"):
            continue
        try:
            stream.reconfigure(errors="specagent-ascii")
        except (AttributeError, ValueError, OSError):  # a stream that cannot be reconfigured: leave it as it is
            pass
