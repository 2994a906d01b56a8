"""The sweep launcher: start an unattended sweep in the background, see what it would cost first.

Pressing Start is the approval: the dialog shows the sweep's predicted device-hours (agent.approvals, the same
figure the agent's own approvals show) before anything runs. The cost and problem lines keep their height, so
the buttons never move under the mouse while a prediction arrives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static

from agent.approvals import sweep_cost
from trainer.config import ConfigError, load_experiment
from tui.sweeps import BackgroundSweep, check_experiment, check_request, default_name, parse_trials, start_sweep

if TYPE_CHECKING:
    from tui.host import Host

EXPERIMENT = "meshpilot.yaml"


class SweepScreen(ModalScreen[BackgroundSweep | None]):
    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Start a sweep in the background", classes="title")
            yield Static("Trials run one after another on this machine; the chat stays free.", classes="dim")
            with Horizontal(classes="field"):
                yield Label("experiment file")
                yield Input(EXPERIMENT, id="experiment", compact=True)
            with Horizontal(classes="field"):
                yield Label("trials")
                yield Input(id="trials", type="integer", compact=True)
            with Horizontal(classes="field"):
                yield Label("name (under sweeps/)")
                yield Input(default_name(self.app.repo, EXPERIMENT), id="name", compact=True)
            yield Static("Predicting the cost…", id="cost")
            yield Static(id="problem")
            with Horizontal(id="buttons"):
                yield Button("Start", id="start", variant="primary")
                yield Button("Cancel", id="cancel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#experiment", Input).focus()
        self._fill_trials(EXPERIMENT)

    @work(thread=True, exclusive=True, group="trials")
    def _fill_trials(self, experiment: str) -> None:
        """The experiment's search.trials as the default."""
        try:
            trials = load_experiment(self.app.repo / experiment).search.trials
        except (ConfigError, OSError):
            trials = 4
        self.app.call_from_thread(self._set_trials, trials)

    def _set_trials(self, trials: int) -> None:
        field = self.query_one("#trials", Input)
        if not field.value:
            field.value = str(trials)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id in ("experiment", "trials"):
            self.query_one("#cost", Static).update("Predicting the cost…")
            self._predict(*self._cost_inputs())

    def _cost_inputs(self) -> tuple[str, str]:
        return self.query_one("#experiment", Input).value, self.query_one("#trials", Input).value

    @work(thread=True, exclusive=True, group="cost")
    def _predict(self, experiment: str, trials: str) -> None:
        try:
            cost = sweep_cost(check_experiment(self.app.repo, experiment), parse_trials(trials))
            text = f"Predicted cost: {cost.describe()}"
        except (ConfigError, OSError, ValueError) as e:
            text = f"No prediction: {e}"
        self.app.call_from_thread(self._show_cost, (experiment, trials), text)

    def _show_cost(self, inputs: tuple[str, str], text: str) -> None:
        # Cancelling a thread worker does not stop its thread: a prediction for a form edited since is dropped
        # here, in the UI's thread, so that it cannot overwrite a newer one that arrived first.
        if inputs == self._cost_inputs():
            self.query_one("#cost", Static).update(Content(text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "start":
            self._start()
        else:
            self.dismiss(None)

    def _start(self) -> None:
        values = {name: self.query_one(f"#{name}", Input).value for name in ("experiment", "name", "trials")}
        try:
            request = check_request(self.app.repo, values["experiment"], values["name"], values["trials"])
            sweep = start_sweep(self.app.repo, request)
        except (ConfigError, OSError) as e:
            self.query_one("#problem", Static).update(Content(str(e)))
            return
        self.dismiss(sweep)
