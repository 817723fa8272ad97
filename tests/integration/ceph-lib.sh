# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# A throwaway single-node Ceph cluster for the rbd tests: one mon and one
# bluestore OSD (on a sparse file), no mgr, cephx on, messenger v2 on
# 127.0.0.1 with a free port.  Everything it makes (config, keys, data,
# sockets, logs, pid files) lives under one directory, DIR, which stop
# removes.  Daemons are stopped by PID (read from their pid files and
# checked against their command line), never by name.
#
# Sourced (by tools/ceph-cluster and the rbd tests):
#   ceph_cluster_start DIR   # DIR must not exist; pool "rbd" ready after
#   ceph_cluster_stop DIR    # stop the daemons, wait for every thread, rm -rf
#   ceph_osd_kill DIR        # kill -9 the OSD (fault tests)
#   ceph_osd_start DIR       # (re)start the OSD, wait until it is active
# Clients then use CEPH_CONF=DIR/ceph.conf (it names the client.admin
# keyring).
#
# Pitfalls this works around (seen on Debian 12, Ceph 16.2):
#  - there is no mgr, so health never reaches HEALTH_OK and some status
#    commands hang: nothing waits for health, every ceph command runs
#    under timeout;
#  - the mon reports a just-killed OSD "up" for a long time: readiness is
#    the OSD's own admin socket saying "state": "active";
#  - an OSD restarted while a thread of the old one lives fails ("failed
#    to lock pidfile"): stopping waits until no thread of it is left;
#  - a client killed -9 holds an image's exclusive lock until the OSD
#    drops its watch: osd client watch timeout is 5 s here, not 30;
#  - mon proposals are batched for 1 s by default: paxos propose interval
#    0.05 makes start-up take about 4 s instead of 10.

CEPH_LIB_T0=${CEPH_LIB_T0:-$(date +%s.%N)}

ceph_log() {
	printf '[ceph-lib %6.2fs] %s\n' \
		"$(awk -v a="$(date +%s.%N)" -v b="$CEPH_LIB_T0" 'BEGIN { print a - b }')" "$*" >&2
}

# The binaries the cluster needs; prints the missing ones.
ceph_missing_tools() {
	local b
	for b in ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd uuidgen python3; do
		command -v "$b" >/dev/null 2>&1 || printf '%s ' "$b"
	done
}

# A TCP port nothing listens on, on 127.0.0.1.
ceph_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ceph_cmd DIR ARGS...: the ceph tool on DIR's cluster, bounded in time.
ceph_cmd() {
	local dir=$1
	shift
	timeout -k 5 60 ceph -c "$dir/ceph.conf" --connect-timeout 20 "$@"
}

# ceph_ours DIR PID: PID is a process of DIR's cluster (its command line
# names DIR's ceph.conf).  Checked before any signal.
ceph_ours() {
	[[ -r /proc/$2/cmdline ]] && tr '\0' ' ' <"/proc/$2/cmdline" | grep -qF -- "$1/ceph.conf"
}

# ceph_alive PID: some thread of PID is neither a zombie nor dead.  The
# main thread turns zombie before the others let go of files and locks.
ceph_alive() {
	local f st
	for f in /proc/"$1"/task/*/stat; do
		[[ -r $f ]] || continue
		st=$(awk '{ sub(/.*\) /, ""); print $1 }' "$f" 2>/dev/null) || continue
		[[ -z $st || $st == Z || $st == X ]] || return 0
	done
	return 1
}

# ceph_stop_pid DIR PID [SIGNAL]: SIGNAL (TERM), up to 10 s, then KILL;
# returns once no thread of PID is left.
ceph_stop_pid() {
	local dir=$1 pid=$2 sig=${3:-TERM} i
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	ceph_ours "$dir" "$pid" || return 0
	kill -"$sig" "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		ceph_alive "$pid" || return 0
		sleep 0.1
	done
	ceph_log "pid $pid ignored SIG$sig: SIGKILL"
	kill -KILL "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		ceph_alive "$pid" || return 0
		sleep 0.1
	done
	ceph_log "pid $pid would not die"
	return 1
}

# ceph_osd_active DIR: the OSD's admin socket says it is active.
ceph_osd_active() {
	timeout -k 2 10 ceph --admin-daemon "$1/run/ceph-osd.0.asok" status 2>/dev/null |
		grep -q '"state": "active"'
}

# ceph_osd_start DIR: start osd.0 (it forks; the parent exits 0 once the
# daemon runs) and wait up to 60 s until it is active.
ceph_osd_start() {
	local dir=$1 i
	for ((i = 1; i <= 3; i++)); do
		timeout -k 5 60 ceph-osd -c "$dir/ceph.conf" -i 0 2>>"$dir/log/osd-start.out" && break
		ceph_log "ceph-osd did not start (try $i); its log ends:"
		tail -n 5 "$dir/log/osd.0.log" >&2 2>/dev/null
		((i < 3)) || return 1
		sleep 1
	done
	for ((i = 0; i < 300; i++)); do
		ceph_osd_active "$dir" && {
			ceph_log "osd.0 active (pid $(cat "$dir/run/osd.0.pid" 2>/dev/null))"
			return 0
		}
		sleep 0.2
	done
	ceph_log "osd.0 not active after 60 s; its log ends:"
	tail -n 10 "$dir/log/osd.0.log" >&2 2>/dev/null
	return 1
}

# ceph_osd_kill DIR: kill -9 osd.0 and wait until every thread is gone.
ceph_osd_kill() {
	local dir=$1 pid
	pid=$(cat "$dir/run/osd.0.pid" 2>/dev/null) || return 1
	ceph_stop_pid "$dir" "$pid" KILL || return 1
	ceph_log "osd.0 (pid $pid) killed"
}

# ceph_write_conf DIR PORT FSID
ceph_write_conf() {
	local dir=$1 port=$2 fsid=$3
	cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$cluster-\$name.\$pid.asok
log file = $dir/log/\$name.log
crash dir = $dir/crash
mon cluster log file = $dir/log/cluster.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.05
paxos min wait = 0.01

[mon]
mon data = $dir/mon/\$id
admin socket = $dir/run/\$cluster-\$name.asok

[osd]
osd data = $dir/osd/\$id
admin socket = $dir/run/\$cluster-\$name.asok
osd objectstore = bluestore
bluestore block path = $dir/osd/\$id.block
bluestore block size = 10737418240
bluestore block create = true
bluestore fsck on mkfs = false
osd memory target = 1073741824
# A client killed -9 keeps its watch, and so an image's exclusive lock,
# this long (default 30 s): the next writer waits for it.
osd client watch timeout = 5

[client]
keyring = $dir/client.admin.keyring
EOF
}

# ceph_cluster_start DIR: make and start the cluster; on any failure stop
# what was started, remove DIR and return 1.
ceph_cluster_start() {
	local dir missing fsid osd_uuid port
	dir=$(realpath -m "$1")
	missing=$(ceph_missing_tools)
	if [[ -n $missing ]]; then
		ceph_log "missing: ${missing% } (apt-get install ceph-mon ceph-osd ceph-common)"
		return 1
	fi
	if [[ -e $dir ]]; then
		ceph_log "$dir exists; refusing to start a cluster there"
		return 1
	fi
	# A unix socket path holds at most 107 bytes.
	if ((${#dir} > 70)); then
		ceph_log "$dir is too long a path for the daemons' admin sockets"
		return 1
	fi
	mkdir -p "$dir"/{mon/a,osd/0,run,log,crash} || return 1
	fsid=$(uuidgen) && osd_uuid=$(uuidgen) && port=$(ceph_free_port) || {
		rm -rf "$dir"
		return 1
	}
	ceph_write_conf "$dir" "$port" "$fsid"
	if ! ceph_cluster_start_steps "$dir" "$fsid" "$osd_uuid" "$port"; then
		ceph_log "start failed; tearing down"
		ceph_cluster_stop "$dir"
		return 1
	fi
	ceph_log "pool rbd ready: export CEPH_CONF=$dir/ceph.conf"
}

ceph_cluster_start_steps() {
	local dir=$1 fsid=$2 osd_uuid=$3 port=$4 keys=$1/mon.keyring
	# Keys: mon., client.admin and osd.0, all in the mon's keyring before
	# its mkfs (ceph-osd --mkfs fetches its config from the mon with its
	# own key).
	ceph-authtool "$keys" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
		ceph-authtool "$dir/client.admin.keyring" --create-keyring --gen-key -n client.admin \
			--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null &&
		ceph-authtool "$dir/osd/0/keyring" --create-keyring --gen-key -n osd.0 \
			--cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null &&
		ceph-authtool "$keys" --import-keyring "$dir/client.admin.keyring" >/dev/null &&
		ceph-authtool "$keys" --import-keyring "$dir/osd/0/keyring" >/dev/null || return 1
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$dir/monmap" >/dev/null ||
		return 1
	timeout -k 5 60 ceph-mon -c "$dir/ceph.conf" -i a --mkfs --monmap "$dir/monmap" \
		--keyring "$keys" 2>"$dir/log/mon-mkfs.out" || { cat "$dir/log/mon-mkfs.out" >&2; return 1; }
	timeout -k 5 60 ceph-mon -c "$dir/ceph.conf" -i a 2>"$dir/log/mon-start.out" ||
		{ cat "$dir/log/mon-start.out" >&2; return 1; }
	ceph_log "mon.a on 127.0.0.1:$port (pid $(cat "$dir/run/mon.a.pid" 2>/dev/null))"
	ceph_cmd "$dir" osd new "$osd_uuid" 0 >/dev/null || return 1
	timeout -k 5 120 ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" \
		2>"$dir/log/osd-mkfs.out" || { cat "$dir/log/osd-mkfs.out" >&2; return 1; }
	ceph_osd_start "$dir" || return 1
	ceph_cmd "$dir" osd pool create rbd 8 8 replicated >/dev/null 2>&1 || return 1
	timeout -k 5 60 rbd -c "$dir/ceph.conf" pool init rbd || return 1
}

# ceph_cluster_stop DIR: kill the OSD, then the mon, then anything else
# still running with DIR's config, each by PID; remove DIR.  A DIR without
# ceph.conf is refused (not ours).
ceph_cluster_stop() {
	local dir f pid rc=0
	dir=$(realpath -m "$1")
	[[ -d $dir ]] || return 0
	if [[ ! -f $dir/ceph.conf ]]; then
		ceph_log "$dir has no ceph.conf; not removing it"
		return 1
	fi
	# SIGKILL: everything is thrown away, and a clean OSD shutdown takes
	# seconds.
	for f in "$dir"/run/osd.*.pid "$dir"/run/mon.*.pid; do
		[[ -f $f ]] || continue
		pid=$(cat "$f" 2>/dev/null)
		ceph_stop_pid "$dir" "$pid" KILL || rc=1
	done
	# One grep over every command line, then a closer look at the hits.
	for f in $(grep -lF -- "$dir/ceph.conf" /proc/[0-9]*/cmdline 2>/dev/null); do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		[[ $pid != "$$" && $pid != "$BASHPID" ]] || continue
		ceph_ours "$dir" "$pid" || continue
		# Only the daemons; a client (a test's own command) is its
		# caller's to end.
		case $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) in
		ceph-mon* | ceph-osd* | */ceph-mon* | */ceph-osd*)
			ceph_log "stray daemon pid $pid"
			ceph_stop_pid "$dir" "$pid" KILL || rc=1
			;;
		esac
	done
	if ((rc == 0)); then
		rm -rf "$dir"
		ceph_log "stopped; removed $dir"
	fi
	return $rc
}
