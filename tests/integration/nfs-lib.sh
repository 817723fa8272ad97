# shellcheck shell=bash disable=SC2034,SC2154
# (SC2034: NFS_* are read by the tests; SC2154: nfs_rc is set inside the trap string.)
# SPDX-License-Identifier: MIT
#
# A real NFS server for tests: nfs-ganesha (VFS FSAL) on 127.0.0.1, NFSv3,
# on two free non-standard ports (NFS and MOUNT), exporting one directory
# with no root squash.  rpcbind is started first (`rpcbind -w`) when none
# answers, because ganesha will not serve NFSv3 without it.  Everything
# is stopped by PID, never by name.
#
# Sourced by a test (after lib.sh and it_begin):
#   source "$IT_DIR/nfs-lib.sh"
#   nfs_server_start DIR      # sets NFS_PORT, MNT_PORT, NFS_URL_BASE
#   nfs_server_restart        # stop + start, same ports and export
#   nfs_server_stop / nfs_server_start_again
#   nfs_server_cleanup        # at exit (nfs_server_start installs it)
# Run as a command by a test program (the state lives in files, so a
# server restarted by a child is still stopped at exit):
#   bash nfs-lib.sh STATE_DIR restart|stop|start
#
# Needs root (the VFS FSAL opens files by handle).

NFS_STATE=${NFS_STATE:-}
NFS_PORT=
MNT_PORT=
NFS_URL_BASE=

nfs_log() {
	printf '[nfs-lib %3ds] %s\n' "$SECONDS" "$*"
}

# A TCP port nothing listens on.
nfs_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

nfs_pid_alive() {
	local state
	state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# nfs_kill_pidfile FILE: TERM (then KILL) the process whose PID is in FILE.
nfs_kill_pidfile() {
	local pid i
	[[ -s $1 ]] || return 0
	pid=$(<"$1")
	rm -f "$1"
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	nfs_pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		nfs_pid_alive "$pid" || return 0
		sleep 0.1
	done
	nfs_log "pid $pid ignored SIGTERM: SIGKILL"
	kill -KILL "$pid" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		nfs_pid_alive "$pid" || return 0
		sleep 0.1
	done
	return 1
}

# Is NFS (and MOUNT) answering on our ports?
nfs_server_answers() {
	rpcinfo -n "$NFS_PORT" -t 127.0.0.1 100003 3 >/dev/null 2>&1 &&
		rpcinfo -n "$MNT_PORT" -t 127.0.0.1 100005 3 >/dev/null 2>&1
}

nfs_load_state() {
	NFS_PORT=$(<"$NFS_STATE/nfs_port")
	MNT_PORT=$(<"$NFS_STATE/mnt_port")
}

# Start rpcbind unless one answers already (ours is recorded to stop).
nfs_rpcbind_ensure() {
	local i
	rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && return 0
	command -v rpcbind >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
	# Own session: a test framework that kills its children's process
	# group must not take the server with it.  Without the nfs tests'
	# lock: an rpcbind left by a killed test would hold it for ever
	# (ganesha keeps it, on purpose, while it serves).
	(
		[[ -z ${NFS_LOCK_FD:-} ]] || exec {NFS_LOCK_FD}>&-
		exec setsid rpcbind -f -w
	) </dev/null >>"$NFS_STATE/rpcbind.log" 2>&1 &
	echo $! >"$NFS_STATE/rpcbind.pid"
	for ((i = 0; i < 100; i++)); do
		rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	nfs_log "rpcbind did not answer"
	return 1
}

# Start ganesha with the state dir's config; wait until it answers.
nfs_ganesha_launch() {
	local i pid
	nfs_rpcbind_ensure || return 1
	PATH=$PATH:/usr/sbin:/sbin setsid ganesha.nfsd -F -f "$NFS_STATE/ganesha.conf" \
		-L "$NFS_STATE/ganesha.log" -p "$NFS_STATE/ganesha.nfsd.pid" -N NIV_WARN \
		</dev/null >>"$NFS_STATE/ganesha.out" 2>&1 &
	pid=$!
	echo "$pid" >"$NFS_STATE/ganesha.pid"
	for ((i = 0; i < 300; i++)); do
		if ! nfs_pid_alive "$pid"; then
			nfs_log "ganesha exited; its log:"
			tail -n 20 "$NFS_STATE/ganesha.log" "$NFS_STATE/ganesha.out" 2>/dev/null | sed 's/^/    | /'
			rm -f "$NFS_STATE/ganesha.pid"
			return 1
		fi
		nfs_server_answers && return 0
		sleep 0.1
	done
	nfs_log "ganesha did not answer within 30 s"
	# Not left running (its ports and rpcbind entries would stay).
	kill -KILL "$pid" 2>/dev/null
	rm -f "$NFS_STATE/ganesha.pid"
	return 1
}

# One test's nfs-ganesha at a time on this machine: the servers register
# their MOUNT service with the one rpcbind, and a client asks rpcbind for
# it, so a second server would answer the first one's mounts (with
# MNT3ERR_ACCES: not its export).  ctest runs these tests one at a time;
# the lock covers tests started by hand beside them.  Held until the test
# exits (fd closed; a child still running holds it until it ends).  The
# holder removes the lock file at exit (nothing left behind), so a test
# that was waiting may hold a file that is no longer at the path: it takes
# the lock again, on the path's new file.
NFS_LOCK_PATH=
nfs_take_lock() {
	local path=${TMPDIR:-/tmp}/dioloop-nfs-tests.lock deadline=$((SECONDS + 900))
	[[ -z $NFS_LOCK_PATH ]] || return 0
	for (( ; ; )); do
		exec {NFS_LOCK_FD}>>"$path"
		if ! flock -w $((deadline > SECONDS ? deadline - SECONDS : 1)) "$NFS_LOCK_FD"; then
			nfs_log "another nfs test held the server lock for 900 s"
			return 1
		fi
		if [[ /proc/self/fd/$NFS_LOCK_FD -ef $path ]]; then
			NFS_LOCK_PATH=$path
			return 0
		fi
		exec {NFS_LOCK_FD}>&-
	done
}

# Remove the lock file, still holding it; the fd closes at exit.
nfs_drop_lock() {
	[[ -n $NFS_LOCK_PATH ]] || return 0
	rm -f "$NFS_LOCK_PATH"
	NFS_LOCK_PATH=
}

# nfs_server_start DIR: serve DIR (made if missing).
# nfs_server_configure DIR: free ports and ganesha.conf exporting DIR.
nfs_server_configure() {
	local dir=$1
	NFS_PORT=$(nfs_free_port) && MNT_PORT=$(nfs_free_port) || return 1
	while [[ $MNT_PORT == "$NFS_PORT" ]]; do MNT_PORT=$(nfs_free_port); done
	echo "$NFS_PORT" >"$NFS_STATE/nfs_port"
	echo "$MNT_PORT" >"$NFS_STATE/mnt_port"
	cat >"$NFS_STATE/ganesha.conf" <<EOF
NFS_CORE_PARAM {
    Protocols = 3;
    NFS_Port = $NFS_PORT;
    MNT_Port = $MNT_PORT;
    Bind_addr = 127.0.0.1;
    Enable_NLM = false;
    Enable_RQUOTA = false;
}
NFS_KRB5 { Active_krb5 = false; }
NFSV4 { Graceless = true; }
EXPORT {
    Export_Id = 1;
    Path = $dir;
    Pseudo = /export;
    Access_Type = RW;
    Squash = No_Root_Squash;
    Protocols = 3;
    SecType = sys;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = WARN; }
EOF
	NFS_URL_BASE="nfs://127.0.0.1:$NFS_PORT$dir"
}

nfs_server_start() {
	local dir=$1
	nfs_take_lock || return 1
	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd -P)
	NFS_STATE=${IT_TMP:?}/nfs-server
	mkdir -p "$NFS_STATE"
	# lib.sh's EXIT trap runs after ours, with the test's status.
	trap 'nfs_rc=$?; nfs_server_cleanup; (exit $nfs_rc); it_cleanup' EXIT
	# A free port can be taken by another process before ganesha binds
	# it: new ports, up to three times.
	for try in 1 2 3; do
		nfs_server_configure "$dir" || return 1
		nfs_ganesha_launch && break
		((try < 3)) || return 1
		nfs_log "ganesha did not start on ports $NFS_PORT/$MNT_PORT: trying others"
	done
	nfs_log "ganesha serves $dir on 127.0.0.1 (NFS port $NFS_PORT, MOUNT port $MNT_PORT)"
}

nfs_server_stop() {
	nfs_kill_pidfile "$NFS_STATE/ganesha.pid"
}

nfs_server_start_again() {
	nfs_load_state
	[[ -s $NFS_STATE/ganesha.pid ]] && nfs_pid_alive "$(<"$NFS_STATE/ganesha.pid")" &&
		return 0
	nfs_ganesha_launch
}

nfs_server_restart() {
	nfs_server_stop && nfs_server_start_again
}

# Stop what we started: ganesha, then our rpcbind (never one we found).
nfs_server_cleanup() {
	if [[ -n $NFS_STATE && -d $NFS_STATE ]]; then
		nfs_kill_pidfile "$NFS_STATE/ganesha.pid"
		nfs_kill_pidfile "$NFS_STATE/rpcbind.pid"
	fi
	nfs_drop_lock
}

# As a command: bash nfs-lib.sh STATE_DIR restart|stop|start
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -uo pipefail
	NFS_STATE=${1:?usage: nfs-lib.sh STATE_DIR restart|stop|start}
	case ${2:-} in
	restart) nfs_server_restart ;;
	stop) nfs_server_stop ;;
	start) nfs_server_start_again ;;
	*)
		echo "usage: nfs-lib.sh STATE_DIR restart|stop|start" >&2
		exit 2
		;;
	esac
fi
