#!/usr/bin/env bash
# Stop the cluster scripts/slurm/up.sh started: cancel its jobs, then stop slurmd, slurmctld and munged through
# their pid files in MESHPILOT_SLURM_DIR (default /tmp/meshpilot-slurm), and any slurmstepd they left. Only
# processes of that cluster are touched: its pid files, its marker (MESHPILOT_SLURM_DAEMON=DIR in the daemons'
# environment) and, for a slurmstepd, a file of DIR it holds open.
#
#   scripts/slurm/down.sh            # stop; the directory (logs, state, munge key) stays for the next up.sh
#   scripts/slurm/down.sh --purge    # stop and remove the directory
#   scripts/slurm/down.sh --quiet    # say nothing when there was nothing to stop (up.sh calls it so)
set -uo pipefail

DIR=${MESHPILOT_SLURM_DIR:-/tmp/meshpilot-slurm}
CONF=$DIR/slurm.conf
PURGE=0
QUIET=0
for arg in "$@"; do
	case $arg in
	--purge) PURGE=1 ;;
	--quiet) QUIET=1 ;;
	*)
		echo "scripts/slurm/down.sh: unknown argument $arg (--purge, --quiet)" >&2
		exit 2
		;;
	esac
done
export PATH=$PATH:/usr/sbin

say() { ((QUIET)) || echo "$@"; }

alive() { # pid file -> whether its process runs (a zombie does not: here nobody may reap an orphan)
	local stat
	[[ -s $1 ]] && stat=$(cat "/proc/$(cat "$1")/stat" 2>/dev/null) && [[ ${stat##*) } != Z* ]]
}

stop() { # name, pid file: SIGTERM, then SIGKILL after 10 s
	local name=$1 pidfile=$2 pid
	alive "$pidfile" || {
		rm -f "$pidfile"
		return 0
	}
	pid=$(cat "$pidfile")
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 100); do
		alive "$pidfile" || break
		sleep 0.1
	done
	if alive "$pidfile"; then
		kill -KILL "$pid" 2>/dev/null
		say "$name (pid $pid) did not stop on SIGTERM: killed"
	else
		say "$name (pid $pid) stopped"
	fi
	rm -f "$pidfile"
}

# The cluster's jobs first, while the controller runs: scancel sends SIGTERM, then SIGKILL after KillWait.
if [[ -f $CONF ]] && alive "$DIR/run/slurmctld.pid"; then
	export SLURM_CONF=$CONF
	jobs=$(timeout 10 squeue -h -o %i 2>/dev/null)
	if [[ -n $jobs ]]; then
		# shellcheck disable=SC2086
		timeout 10 scancel $jobs 2>/dev/null
		for _ in $(seq 60); do
			[[ -z $(timeout 10 squeue -h -o %i 2>/dev/null) ]] && break
			sleep 0.5
		done
		say "cancelled jobs: $(tr '\n' ' ' <<<"$jobs")"
	fi
fi

stop slurmd "$DIR/run/slurmd.pid"
stop slurmctld "$DIR/run/slurmctld.pid"
stop munged "$DIR/run/munged.pid"

# What the daemons started and left: slurmctld's helper carries MESHPILOT_SLURM_DAEMON=DIR; a job's slurmstepd
# (which outlives slurmd) does not, but keeps DIR/log/slurmd.log open; a job's own processes (its script, srun,
# what they run) carry SLURM_CONF=DIR/slurm.conf and SLURM_JOB_ID.
for proc in /proc/[0-9]*; do
	pid=${proc#/proc/}
	[[ $pid == "$$" ]] && continue
	ours=0
	if grep -qzxF "MESHPILOT_SLURM_DAEMON=$DIR" "$proc/environ" 2>/dev/null; then
		ours=1
	elif grep -qzxF "SLURM_CONF=$CONF" "$proc/environ" 2>/dev/null && grep -qz "^SLURM_JOB_ID=" "$proc/environ" 2>/dev/null; then
		ours=1
	elif [[ $(cat "$proc/comm" 2>/dev/null) == slurmstepd ]]; then
		for fd in "$proc"/fd/*; do
			[[ $(readlink "$fd" 2>/dev/null) == "$DIR"/* ]] && ours=1 && break
		done
	fi
	if ((ours)); then
		command=$(tr '\0' ' ' 2>/dev/null <"$proc/cmdline")
		kill -KILL "$pid" 2>/dev/null && say "killed ${command:-pid $pid} (pid $pid), left by the cluster"
	fi
done

if ((PURGE)); then
	rm -rf "$DIR"
	say "removed $DIR"
fi
exit 0
