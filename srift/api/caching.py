"""HTTP caching of reads: ETag and Cache-Control on every successful GET under /v1 (304 when the client's
copy is current), and a per-process store of serialized read answers keyed by the data revisions they use.

`ConditionalGet` (ASGI middleware) gives each 200 answer to a GET/HEAD under /v1 a strong ETag (a hash of
the body, unless the route set one) and a Cache-Control header (unless the route set one), and answers
`304 Not Modified` without a body when `If-None-Match` names that ETag. `cached_json` lets a read route
keep its serialized answer per (database, revisions of the areas it reads, request) in a
srift.services.caching.RevisionCache: a catalog read then costs one query for the revision tokens instead
of rebuilding the answer, and any write to the area, from any process, changes the key. `cached_json_async`
does the same for `async def` routes: on PostgreSQL the token query is awaited on the event loop, so a
cached answer takes no thread-pool round trip (each is a wait for the GIL among the pool's threads, which on
a busy host is most of the read tail); a miss builds in the thread pool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from srift.db.revisions import database_key_of, read_revisions_async
from srift.db.session import async_reader, read_session_factory
from srift.domain.revisions import DataArea, Revisions
from srift.services.caching import RevisionCache
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


READS: RevisionCache[tuple[bytes, str]] = RevisionCache("serialized reads", max_entries=512)


def cached_json(
    *,
    session: Session,
    areas: tuple[DataArea, ...],
    key: Hashable,
    build: Callable[[], bytes],
) -> Response:
    """The JSON answer `build()` makes, with its ETag, reused while the revisions of `areas` stay the same.

    `build` raising (a 4xx for a bad filter) caches nothing.
    """

    def serialized() -> tuple[bytes, str]:
        body = build()
        return body, etag_of(body)

    return _json(READS.get_or_build(session=session, areas=areas, key=key, build=serialized))


async def cached_json_async(
    request: Request,
    *,
    areas: tuple[DataArea, ...],
    key: Hashable,
    build: Callable[[Session], bytes],
) -> Response:
    """`cached_json` for `async def` routes: a hit costs one awaited query on PostgreSQL and no thread; a
    miss, SQLite, and a failed token query (the pool then replaces the connection) build in the thread pool
    with a read session, checking the tokens again there."""
    settings: Settings = request.app.state.settings
    url = settings.resolved_database_url
    engine = async_reader(url)
    if engine is not None:
        revisions: Revisions | None
        try:
            revisions = await read_revisions_async(engine)
        except DBAPIError:
            revisions = None
        if revisions is not None:
            found = READS.peek(database=database_key_of(url), revisions=revisions, areas=areas, key=key)
            if found is not None:
                return _json(found)

    def in_thread() -> Response:
        session = read_session_factory(url)()
        try:
            return cached_json(session=session, areas=areas, key=key, build=lambda: build(session))
        finally:
            session.close()

    return await run_in_threadpool(in_thread)


def _json(answer: tuple[bytes, str]) -> Response:
    body, etag = answer
    return Response(content=body, media_type=JSON, headers={"etag": etag})
