#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests/test_slurm.py (and for trying `meshpilot sweep --executor
# slurm` by hand): munged, slurmctld and slurmd with a minimal slurm.conf (one node named after `hostname -s`
# with this machine's CPUs and memory, one partition, no accounting, no cgroups).
#
#   scripts/slurm/up.sh            # install what is missing (Debian: apt), start the daemons, wait for the node
#   export SLURM_CONF=/tmp/meshpilot-slurm/slurm.conf    # what sinfo, sbatch and srun then need (printed last)
#   scripts/slurm/down.sh          # stop them again
#
# Idempotent: a cluster that is up is left as it is. Everything it writes and every daemon it starts lives in
# MESHPILOT_SLURM_DIR (default /tmp/meshpilot-slurm): the config, the munge key and socket, pid files, logs,
# slurmctld's state and slurmd's spool; nothing goes to /etc, /run or /var (apt's packages aside).
# MESHPILOT_SLURM_PORT (default 6817) is slurmctld's port, slurmd listens on the next one.
# MESHPILOT_SLURM_TIMEOUT (default 60) bounds the wait for the node to turn idle, in seconds.
# On failure it exits non-zero with one line on stderr saying why (the daemons' logs are in DIR/log).
set -euo pipefail

DIR=${MESHPILOT_SLURM_DIR:-/tmp/meshpilot-slurm}
PORT=${MESHPILOT_SLURM_PORT:-6817}
TIMEOUT=${MESHPILOT_SLURM_TIMEOUT:-60}
CONF=$DIR/slurm.conf
NODE=$(hostname -s)
PACKAGES=(slurmctld slurmd slurm-client munge)

HERE=$(cd "$(dirname "$0")" && pwd)
STARTED= # set once a daemon may run: a failure then stops what started, leaving nothing running

die() {
	echo "scripts/slurm/up.sh: $*" >&2
	[[ -z $STARTED ]] || "$HERE/down.sh" --quiet >/dev/null 2>&1
	exit 1
}

alive() { # pid file -> whether its process runs (a zombie does not: here nobody may reap an orphan)
	local stat
	[[ -s $1 ]] && stat=$(cat "/proc/$(cat "$1")/stat" 2>/dev/null) && [[ ${stat##*) } != Z* ]]
}

node_state() {
	SLURM_CONF=$CONF timeout 10 sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1 || true
}

cluster_up() {
	alive "$DIR/run/munged.pid" && alive "$DIR/run/slurmctld.pid" && alive "$DIR/run/slurmd.pid" &&
		[[ $(node_state) =~ ^(idle|mixed|allocated) ]]
}

if [[ -f $CONF ]] && cluster_up; then
	echo "SLURM is up: node $NODE $(node_state); export SLURM_CONF=$CONF"
	exit 0
fi

# -- packages
export PATH=$PATH:/usr/sbin
missing=()
for tool in slurmctld slurmd sinfo sbatch srun munged; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
	command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get to install them (install SLURM and munge)"
	[[ $(id -u) == 0 ]] || die "${missing[*]} missing; installing ${PACKAGES[*]} needs root (apt-get)"
	mkdir -p "$DIR/log"
	APT_LOG=$DIR/log/apt.log
	export DEBIAN_FRONTEND=noninteractive
	# The packages' own services (with /etc's config) start only under an init system; ours run from DIR.
	if ! timeout 300 apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >"$APT_LOG" 2>&1; then
		timeout 120 apt-get update -q >>"$APT_LOG" 2>&1 || die "apt-get update failed (see $APT_LOG)"
		timeout 300 apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$APT_LOG" 2>&1 ||
			die "apt-get install ${PACKAGES[*]} failed (see $APT_LOG)"
	fi
fi

# -- leftovers of an earlier cluster in DIR (a daemon died, or the machine restarted): stop them first
"$HERE/down.sh" --quiet

USER_NAME=$(id -un)
mkdir -p "$DIR"/{munge,run,log,state,spool}
chmod 700 "$DIR/munge"
chmod 755 "$DIR" "$DIR/run" "$DIR/log"

# -- munge: its own key, socket and daemon
KEY=$DIR/munge/munge.key
if [[ ! -s $KEY ]]; then
	(umask 077 && head -c 1024 /dev/urandom >"$KEY")
fi
chmod 400 "$KEY"
SOCKET=$DIR/munge/munge.socket.2
export MESHPILOT_SLURM_DAEMON=$DIR # carried by every daemon and what it starts: how down.sh finds leftovers
STARTED=1
munged --force --key-file="$KEY" --socket="$SOCKET" --pid-file="$DIR/run/munged.pid" \
	--log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" ||
	die "munged did not start (see $DIR/log/munged.log)"
for _ in $(seq 50); do
	[[ -S $SOCKET ]] && break
	sleep 0.1
done
[[ -S $SOCKET ]] || die "munged did not open its socket $SOCKET (see $DIR/log/munged.log)"

# -- slurm.conf: one node, this machine as slurmd -C sees it
HARDWARE=$(slurmd -C | head -1) || die "slurmd -C could not describe this machine"
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$HARDWARE")
MEMORY=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$HARDWARE")
[[ -n $CPUS && -n $MEMORY ]] || die "could not read CPUs and RealMemory from slurmd -C: $HARDWARE"
cat >"$CONF" <<EOF
# Written by scripts/slurm/up.sh: a one-node cluster for tests. Everything lives in $DIR.
ClusterName=meshpilot
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
PlugStackConfig=$DIR/plugstack.conf
# No accounting: job states come from the controller alone (squeue), as on clusters without slurmdbd.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# No cgroups: processes are tracked through /proc and not bound to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobContainerType=job_container/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# scancel: SIGTERM, then SIGKILL after KillWait seconds; ended jobs stay visible to squeue for MinJobAge seconds.
KillWait=10
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEMORY State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
: >"$DIR/plugstack.conf" # no SPANK plugins (the system's plugstack.conf.d is not ours)
export SLURM_CONF=$CONF

# -- the daemons (each forks into the background and writes its pid file); slurmctld starts afresh (-c): no jobs
# of an earlier cluster in DIR come back
slurmctld -f "$CONF" -c || die "slurmctld did not start (see $DIR/log/slurmctld.log)"
slurmd -f "$CONF" || die "slurmd did not start (see $DIR/log/slurmd.log)"

deadline=$((SECONDS + TIMEOUT))
state=
while ((SECONDS < deadline)); do
	state=$(node_state)
	case $state in
	idle* | mixed* | allocated*) break ;;
	down* | drain*) SLURM_CONF=$CONF timeout 10 scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
	esac
	alive "$DIR/run/slurmctld.pid" || die "slurmctld exited (see $DIR/log/slurmctld.log)"
	alive "$DIR/run/slurmd.pid" || die "slurmd exited (see $DIR/log/slurmd.log)"
	sleep 0.5
done
[[ $state =~ ^(idle|mixed|allocated) ]] ||
	die "node $NODE is not idle after ${TIMEOUT}s (sinfo says '${state:-nothing}'; logs in $DIR/log)"
echo "SLURM is up: node $NODE $state ($CPUS CPUs, $MEMORY MB); export SLURM_CONF=$CONF"
