"""The approval dialog for the agent's interrupts: launches above the cost threshold, pushes, pull requests.

Approve runs the call as it is; Edit opens its arguments (JSON) and runs it with the changes merged in; Reject
asks for a reason, which the model reads. Escape puts the decision off: the conversation keeps waiting. While
the arguments or the reason are typed, the focused text field takes the letters, so a, e and r are text then.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static, TextArea

TITLES = {"launch": "Launch?", "pull_request": "Push and open a pull request?"}


class ApprovalScreen(ModalScreen[dict[str, Any] | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "Approve"),
        Binding("e", "edit", "Edit"),
        Binding("r", "reject", "Reject"),
        Binding("escape", "later", "Decide later"),
        Binding("ctrl+s", "save_edit", "Run edited", show=False, priority=True),
    ]

    def __init__(self, request: dict[str, Any]):
        super().__init__()
        self.request = request
        self.mode = "choose"  # choose | edit | reject

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(TITLES.get(self.request.get("kind"), "Approve this tool call?"), classes="title")
            yield Static(Content(self.request.get("summary", "")), id="summary")
            yield Static(Content(f"tool: {self.request.get('tool')}"), classes="dim")
            yield TextArea(
                json.dumps(self.request.get("args", {}), indent=2), language=None, read_only=True, id="args",
                show_line_numbers=False, soft_wrap=True,
            )  # fmt: skip
            yield Input(placeholder="why not? (Enter rejects)", id="reason")
            yield Static(id="problem")
            with Horizontal(id="buttons"):
                yield Button("Approve", id="approve", variant="success")
                yield Button("Edit", id="edit", variant="primary")
                yield Button("Reject", id="reject", variant="error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reason").display = False
        self.query_one("#problem").display = False
        self.query_one("#approve", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"approve": self.action_approve, "edit": self.action_edit, "reject": self.action_reject}[event.button.id]()

    def action_approve(self) -> None:
        self.dismiss({"action": "approve"})

    def action_edit(self) -> None:
        if self.mode == "edit":
            self.action_save_edit()
            return
        self.mode = "edit"
        arguments = self.query_one("#args", TextArea)
        arguments.read_only = False
        arguments.focus()
        self.query_one("#edit", Button).label = "Run edited (ctrl+s)"

    def action_save_edit(self) -> None:
        if self.mode != "edit":
            return
        try:
            arguments = json.loads(self.query_one("#args", TextArea).text)
        except ValueError as e:
            self._problem(f"not JSON: {e}")
            return
        if not isinstance(arguments, dict):
            self._problem("the arguments must be a JSON object")
            return
        original = self.request.get("args", {})
        changed = {k: v for k, v in arguments.items() if original.get(k, object()) != v}
        if not changed:
            self._problem("nothing changed: edit the arguments, or approve")
            return
        self.dismiss({"action": "edit", "args": changed})

    def action_reject(self) -> None:
        self.mode = "reject"
        reason = self.query_one("#reason", Input)
        reason.display = True
        reason.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss({"action": "reject", "reason": event.value.strip() or "the user rejected it"})

    def action_later(self) -> None:
        if self.mode != "choose":  # back from editing or rejecting
            self.mode = "choose"
            self.query_one("#reason").display = False
            self.query_one("#args", TextArea).read_only = True
            self.query_one("#edit", Button).label = "Edit"
            self.query_one("#approve", Button).focus()
            return
        self.dismiss(None)

    def _problem(self, text: str) -> None:
        problem = self.query_one("#problem", Static)
        problem.update(Content(text))
        problem.display = True


def describe_decision(request: dict[str, Any] | None, decision: dict[str, Any]) -> str:
    """The line the chat keeps of a decision."""
    tool = (request or {}).get("tool", "the tool call")
    if decision["action"] == "approve":
        return f"✓ approved {tool}"
    if decision["action"] == "edit":
        return f"✎ approved {tool} with {json.dumps(decision['args'])}"
    return f"✗ rejected {tool}: {decision.get('reason')}"
