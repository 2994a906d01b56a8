"""One agent call (send, resume or recover) running beside the UI, its events handed to the UI in batches.

The call runs in a daemon thread of its own rather than in Textual's thread pool: a call can block for as long as
a training run lasts (wait_run), and asyncio waits for its pool's threads when the app exits, so quitting with a
run going on would hang. A daemon thread ends with the process; the conversation's state was saved before the
step it was in (LangGraph durability "sync"), and the next session finishes that step with Agent.recover.

The UI follows a call from a Textual worker (`batches`): each batch holds every event that arrived since the
previous one, so a model streaming many small chunks costs the UI one update per batch, never one per token.
A conversation the user leaves keeps running; coming back, the UI follows what is still to come.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any


class AgentRun:
    def __init__(
        self, thread_id: str, produce: Callable[[], Iterable[Any]], on_finish: Callable[[AgentRun], None] | None = None
    ):
        self.thread_id = thread_id
        self.error: BaseException | None = None
        self.finished = False
        self._produce = produce
        self._on_finish = on_finish
        self._lock = threading.Lock()
        self._pending: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    def start(self) -> AgentRun:
        """Start the call; must be called from the UI's event loop."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        threading.Thread(target=self._run, name=f"meshpilot-agent-{self.thread_id}", daemon=True).start()
        return self

    def skip_backlog(self) -> None:
        """Drop the events nobody followed: a conversation shown again is read from the checkpointer instead."""
        with self._lock:
            self._pending.clear()

    async def batches(self) -> AsyncIterator[list[Any]]:
        """Lists of events as they arrive; raises the call's error at the end, if it failed."""
        assert self._wake is not None, "start() first"
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, []
                finished = self.finished
            if batch:
                yield batch
            if finished:
                if self.error is not None:
                    raise self.error
                return

    def _run(self) -> None:
        try:
            for event in self._produce():
                with self._lock:
                    self._pending.append(event)
                self._notify(self._wake.set)
        except BaseException as error:  # handed to the UI, which shows it; the thread must not die silently
            self.error = error
        finally:
            with self._lock:
                self.finished = True
            self._notify(self._wake.set)
            if self._on_finish is not None:
                self._notify(lambda: self._on_finish(self))

    def _notify(self, callback: Callable[[], Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the UI's loop has closed: the app quit, nobody listens any more
            self._loop.call_soon_threadsafe(callback)
