"""The private benchmark suite (tasks, sealed store, runner, leaderboard)."""
