"""The Textual terminal UI, `meshpilot chat`.

    cli.py           the subcommand: checks its arguments, builds the Agent, runs the app
    app.py           the app: the Agent, the agent calls under way, the runs (polled), screen keys, quitting
    agent_run.py     one agent call in a daemon thread, its events handed to the UI in batches
    conversation.py  a saved conversation as the events the chat shows
    runs.py          runs and sweep trials read from their run directories (runs/, sweeps/*/trials/)
    sweeps.py        sweeps started in the background; the jobs quitting cancels or leaves running
    reports.py       reports on meshpilot's report branches and in the work tree
    commands.py      the slash commands the prompt completes
    screens/         chat (main), approval, runs, report, leaderboard, sweep launcher, conversations, help, quit
    widgets/         prompt, chat entries, runs table and charts
    styles/          .tcss

Nothing here trains, plans or decides: the agent (agent.session) does, and the run directories say what runs
are doing. The UI reads both and never blocks on either: agent calls run in threads of their own, the run
directories are read by a polling worker.
"""
