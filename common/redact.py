"""One redaction rule for every boundary where text leaves a request: a file, a console, an exception.

Why one rule: a key leaks through whichever path was forgotten (an httpx message quoting the header,
a proxy's error body echoing ``Authorization``, a URL with ``user:pass@``). So every message that
can carry server or request text goes through `redact` before it is raised, written or printed:

* the values of the environment variables that hold API keys (the endpoints' ``--*-api-key-env``
  and any variable whose name says KEY, TOKEN, SECRET or PASSWORD) and the passwords in proxy
  variables (``HTTPS_PROXY=http://user:pass@host``), in every form a server may quote them back:
  raw, stripped, JSON-escaped, repr-escaped, URL-encoded and base64 (plain and URL-safe). A key
  base64-encoded together with other text (``Basic base64(user:key)``) is caught only by the
  header patterns below;
* ``Authorization`` / ``Proxy-Authorization`` / ``api-key`` / ``x-api-key`` header values and
  ``Bearer`` tokens, whatever the key;
* credentials in URLs: user-info (``https://user:pass@host``) and key-like query parameters
  (``?api_key=``, ``&token=``, ``&sig=`` ...).

A key is masked as its first three and last two characters (``sk-…4a``), so a user can still tell
which of their keys it was. `printable` also escapes control characters (``ESC`` → ``\\x1b``), so a
server's text cannot set a terminal's title or colours.
"""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping

#: Environment variable names whose values are treated as secrets wherever they appear.
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
#: Proxy variables: their URL's password is a secret (the host is not).
PROXY_ENV = re.compile(r"^(https?|all|ftp)_proxy$", re.I)
#: Shorter values are not masked by value (too likely to occur as ordinary text); the patterns still apply.
MIN_SECRET_LEN = 6
MASK = "***"

_HEADER = re.compile(r"(?i)((?:proxy-)?authorization|x-api-key|api-key|apikey)(['\"]?\s*[:=]\s*['\"]?)"
                     r"((?:bearer|basic|token)\s+)?[^\s'\",;}]+")
#: a token after Bearer/Basic holds a digit or a symbol, so prose ("bearer tokens", "Basic arithmetic") is left alone
_BEARER = re.compile(r"\b([Bb]earer|BEARER|Basic)\s+(?=[A-Za-z]*[0-9._~+/=\-])[A-Za-z0-9._~+/=\-]{6,}")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]+@")
_QUERY = re.compile(r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|secret|password|passwd|sig|signature)=)"
                    r"[^&\s#'\"]+")
_SK = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{12,}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def mask(secret: str) -> str:
    """A secret shown as `sk-…4a`: enough to tell keys apart, never enough to use one."""
    s = secret.strip()
    return f"{s[:3]}…{s[-2:]}" if len(s) >= 12 else MASK


def forms(secret: str) -> set[str]:
    """Every form of `secret` a server or a library may write back: raw, stripped, JSON- and repr-escaped, URL-encoded, base64."""
    out: set[str] = set()
    for form in {secret, secret.strip()}:
        if len(form) < MIN_SECRET_LEN:
            continue
        raw = form.encode("utf-8", "surrogateescape")
        out |= {form, json.dumps(form)[1:-1], repr(form)[1:-1], urllib.parse.quote(form, safe=""),
                urllib.parse.quote_plus(form), base64.b64encode(raw).decode().rstrip("="),
                base64.urlsafe_b64encode(raw).decode().rstrip("=")}
    return {f for f in out if len(f) >= MIN_SECRET_LEN}


def env_secrets(names: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secret values to mask, in all their `forms`: the named variables', every key-like variable's and every proxy
    variable's password (longest first)."""
    env = os.environ if environ is None else environ
    wanted = set(names) | {n for n in env if SECRET_ENV.search(n)}
    values = [env.get(n) for n in wanted]
    for n in env:
        if PROXY_ENV.match(n):
            try:
                values.append(urllib.parse.unquote(urllib.parse.urlsplit(env[n]).password or ""))
            except ValueError:  # not a URL: the whole value is the one thing it could be
                values.append(env[n])
    out: set[str] = set()
    for v in values:
        if v:
            out |= forms(v)
    return tuple(sorted(out, key=len, reverse=True))


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """`text` with the given secret values (in all their `forms`) masked, and nothing else changed (for data such as a model's answer)."""
    for sec in sorted({f for s in secrets if s for f in forms(s)}, key=len, reverse=True):
        if sec in text:
            text = text.replace(sec, mask(sec))
    return text


def redact(text: object, secrets: Iterable[str] | None = None) -> str:
    """`text` with every secret (the given ones, or `env_secrets()`), auth header, bearer token and URL credential masked."""
    s = redact_values(str(text), env_secrets() if secrets is None else secrets)
    s = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}", s)
    s = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", s)
    s = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", s)
    s = _QUERY.sub(lambda m: f"{m.group(1)}{MASK}", s)
    return _SK.sub(lambda m: mask(m.group(0)), s)


def redact_url(url: str) -> str:
    """A URL as it may be shown or stored: user-info and key-like query parameters masked."""
    return _QUERY.sub(lambda m: f"{m.group(1)}{MASK}", _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url))


def printable(text: object) -> str:
    """`text` with control characters written as escapes (`\\x1b`), so no server text drives a terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", str(text))


def clean(text: object, secrets: Iterable[str] | None = None) -> str:
    """What may leave the process: redacted, then printable."""
    return printable(redact(text, secrets))


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be sent as an HTTP header value (a phrase that never quotes it), or None."""
    if any(c in value for c in "\r\n"):
        return "it holds a line break (CR or LF), e.g. from a file saved on Windows or a pasted newline"
    if any(ord(c) > 126 for c in value):
        return "it holds a non-ASCII character (e.g. a typographic quote pasted from a web page)"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "it holds a control character"
    if value != value.strip():
        return "it starts or ends with white space"
    return None
