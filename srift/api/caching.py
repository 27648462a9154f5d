"""HTTP caching of reads: ETag and Cache-Control on every successful GET under /v1 (304 when the client's
copy is current), and a per-process store of serialized read answers keyed by the data revisions they use.

`ConditionalGet` (ASGI middleware) gives each 200 answer to a GET/HEAD under /v1 a strong ETag (a hash of
the body, unless the route set one) and a Cache-Control header (unless the route set one), and answers
`304 Not Modified` without a body when `If-None-Match` names that ETag. `cached_read` lets a read route
keep its serialized answer per (database, revisions of the areas it reads, request): a catalog read then
costs one query for the revision tokens (see srift.db.revisions) instead of rebuilding the answer, and any
write to the area, from any process, changes the key.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

from sqlalchemy.orm import Session
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from srift.db.revisions import Area, database_key, read_revisions
from srift.settings import Settings

JSON = "application/json"


def etag_of(body: bytes) -> str:
    """A strong ETag for `body`: a quoted 128-bit BLAKE2b digest."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def cache_control(settings: Settings) -> str:
    """The Cache-Control of read answers: revalidate (no-cache) unless SRIFT_CACHE_MAX_AGE_S allows reuse;
    `private` when reads need a token, so shared caches do not keep them."""
    age = "no-cache" if settings.cache_max_age_s <= 0 else f"max-age={settings.cache_max_age_s}"
    return f"private, {age}" if settings.read_requires_token else age


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison of an If-None-Match list with `etag`."""
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in if_none_match.split(","))


class ConditionalGet:
    """ETag, Cache-Control and 304 for successful GET/HEAD answers under `prefix`."""

    def __init__(self, app: ASGIApp, *, cache_control: str, prefix: str = "/v1/") -> None:
        self.app = app
        self.cache_control = cache_control.encode()
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in ("GET", "HEAD")
            or not scope["path"].startswith(self.prefix)
        ):
            await self.app(scope, receive, send)
            return
        if_none_match = next(
            (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"if-none-match"), None
        )
        start: Message | None = None
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if message["status"] != 200:
                    await send(message)
                    return
                start = message
                return
            if start is None:  # not a 200: pass through untouched
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                head = scope["method"] == "HEAD"
                await self._finish(start, b"".join(chunks), if_none_match, send, head=head)

        await self.app(scope, receive, capture)

    async def _finish(
        self, start: Message, body: bytes, if_none_match: str | None, send: Send, *, head: bool
    ) -> None:
        headers = list(start.get("headers", ()))
        names = {k.lower() for k, _ in headers}
        etag = next((v.decode("latin-1") for k, v in headers if k.lower() == b"etag"), None)
        if etag is None and not head:  # a HEAD answer carries no body to hash
            etag = etag_of(body)
            headers.append((b"etag", etag.encode()))
        if b"cache-control" not in names:
            headers.append((b"cache-control", self.cache_control))
        if etag is not None and if_none_match is not None and _matches(if_none_match, etag):
            kept = {b"etag", b"cache-control", b"vary", b"date", b"content-location", b"expires"}
            await send(
                {
                    "type": "http.response.start",
                    "status": 304,
                    "headers": [(k, v) for k, v in headers if k.lower() in kept],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class ReadCache:
    """Serialized read answers (body, ETag) per key, least recently used dropped beyond `max_entries`."""

    def __init__(self, *, max_entries: int = 512) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, tuple[bytes, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> tuple[bytes, str] | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, value: tuple[bytes, str]) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


READS = ReadCache()


def cached_read(
    *,
    session: Session,
    areas: Sequence[Area],
    key: Hashable,
    build: Callable[[], bytes],
    cache: ReadCache = READS,
) -> Response:
    """The JSON answer `build()` makes, reused while the revisions of `areas` in this database stay the same.

    The revision tokens are read before `build` runs (in the same session), so an entry is never older
    than its key. `build` raising (a 4xx for a bad filter) caches nothing.
    """
    revisions = read_revisions(session=session)
    full_key = (database_key(session), tuple(getattr(revisions, a.value) for a in areas), key)
    found = cache.get(full_key)
    if found is None:
        body = build()
        found = (body, etag_of(body))
        cache.put(full_key, found)
    body, etag = found
    return Response(content=body, media_type=JSON, headers={"etag": etag})
