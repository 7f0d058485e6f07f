#!/usr/bin/env bash
# Many hosts on one machine: a cluster of network namespaces for mpirun.
#
#   scripts/cluster.sh up H [--rate 1gbit] [--slots S] [--name NAME]
#       H namespaces ("hosts") NAME-h0 .. NAME-h<H-1>, each with loopback and
#       an eth0 at 10.213.N.<i+1>/24, joined by veth pairs to a bridge NAME-br
#       that only this cluster uses; each link shaped by tc tbf at --rate in
#       both directions (the bridge-side end shapes what a host receives, the
#       namespace end what it sends; --rate none: unshaped). The root
#       namespace gets 10.213.N.254 on the bridge: mpirun runs there, like a
#       login node, and reaches every orted over the cluster subnet.
#       Prints NAME (cohort<N>, the next free N in turn, unless --name gives it).
#   scripts/cluster.sh run [--name NAME] [--map-by node|slot] -- CMD...
#       mpirun with the cluster's arguments (hostfile, rsh agent, TCP between
#       hosts restricted to the subnet, shared memory within one), then CMD.
#       Inside, mpirun resolves the host names through the cluster's hosts
#       file, bind-mounted over /etc/hosts in a private mount namespace.
#   scripts/cluster.sh each [--name NAME] [--port P] -- CMD...
#       CMD once in every host, as torchrun's launcher would start it: RANK
#       (the host's index), WORLD_SIZE (the hosts), MASTER_ADDR (host 0),
#       MASTER_PORT (P, 29500) and GLOO_SOCKET_IFNAME=eth0 set. Waits for all;
#       the first to fail ends the others, and its status is the result.
#   scripts/cluster.sh args [--name NAME]   the mpirun arguments, one line
#   scripts/cluster.sh dir  [--name NAME]   the cluster's state folder
#   scripts/cluster.sh list                 the clusters up: name hosts slots rate subnet
#   scripts/cluster.sh down [--name NAME]   removes everything up made
#   scripts/cluster.sh with H [up options] -- CMD...
#       up, CMD with COHORT_CLUSTER=NAME in its environment, down on any exit.
#   scripts/cluster.sh check                exit 0 if this machine can do it
#
# NAME defaults to $COHORT_CLUSTER, else to the only cluster that is up.
# State lives in /run/cohort-cluster/NAME: hostfile (`NAME-hI slots=S`),
# hosts (an /etc/hosts with the cluster's names), agent (the rsh agent that
# mpirun calls as `agent HOST orted-command...`: it enters HOST's network
# namespace with `ip netns exec`, gives it its own hostname in a UTS
# namespace and its hosts file in a mount namespace, and runs the command
# with sh -c, as ssh would, keeping orted in mpirun's session: one scheduling
# group for all hosts, as on one host), and mpirun.args. Nothing outside the
# cluster's own devices, namespaces and that folder is touched; /etc/hosts is
# never written. Needs root, iproute2 (ip, tc), util-linux (unshare, flock).
set -euo pipefail

readonly kStateRoot=/run/cohort-cluster
readonly kLock=/run/lock/cohort-cluster.lock
readonly kSubnetPrefix=10.213
g_cleanup=""  # the cluster an EXIT trap takes down
g_child=""    # the command `with` runs
g_ranks=()    # the processes `each` runs

die() { echo "cluster.sh: $*" >&2; exit 2; }

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Why this machine cannot run a cluster (empty if it can).
why_not() {
  [ "$(id -u)" = 0 ] || { echo "needs root (ip netns)"; return; }
  for t in ip tc unshare flock mpirun; do
    command -v "$t" >/dev/null || { echo "needs $t"; return; }
  done
  # Hosts get the cluster's names by a bind mount over /etc/hosts, which must exist.
  [ -e /etc/hosts ] || { echo "needs /etc/hosts (the hosts' names are bound over it)"; return; }
  local probe="cohort-probe-$$" mounted=0
  # `ip netns add` makes /run/netns a mount point on first use; a probe that
  # finds namespaces unusable takes that mount back, or it is left behind
  # (a fresh root's clean-up then cannot remove /run/netns).
  mountpoint -q /run/netns 2>/dev/null && mounted=1
  if ! ip netns add "$probe" 2>/dev/null; then echo "ip netns add failed"; return; fi
  # ip netns exec remounts / as a slave, which fails where / is no mount point (a chroot).
  if ! ip netns exec "$probe" true 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null || true
    [ "$mounted" = 1 ] || umount /run/netns 2>/dev/null || true
    echo "ip netns exec failed (/ is not a mount point here: a chroot?)"; return
  fi
  ip netns del "$probe" 2>/dev/null || true
}

# tc rate ("1gbit", "500mbit", "10gbit") -> bits per second.
rate_bps() {
  local r=$1 n unit
  n=${r%%[a-z]*}
  unit=${r#"$n"}
  case "$unit" in
    gbit) echo $((n * 1000000000)) ;;
    mbit) echo $((n * 1000000)) ;;
    kbit) echo $((n * 1000)) ;;
    bit) echo "$n" ;;
    *) die "--rate $r: give a number with kbit, mbit or gbit (or none)" ;;
  esac
}

# tbf on one device: a 2 ms bucket (at least 64 KiB so a GSO packet fits),
# 20 ms of queue.
shape() {
  local ns=$1 dev=$2 rate=$3 burst
  [ "$rate" = none ] && return 0
  burst=$(($(rate_bps "$rate") / 8 / 500))
  [ "$burst" -ge 65536 ] || burst=65536
  ${ns:+ip netns exec "$ns"} tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" \
    latency 20ms
}

# The next N in 0..199, round-robin after the last one handed out, with no
# cluster state, bridge or namespace (under kLock). Round-robin: a name just
# taken down is not reused at once, so a check that it left nothing behind
# cannot see a newer cluster's devices.
free_index() {
  local n last k
  last=$(cat "$kStateRoot/.last" 2>/dev/null || echo 199)
  [[ "$last" =~ ^[0-9]+$ ]] || last=199
  for k in $(seq 1 200); do
    n=$(((last + k) % 200))
    [ -e "$kStateRoot/cohort$n" ] && continue
    ip link show "cohort$n-br" >/dev/null 2>&1 && continue
    ip netns list | grep -q "^cohort$n-" && continue
    echo "$n" >"$kStateRoot/.last"
    echo "$n"
    return
  done
  die "no free cluster index (200 clusters up?)"
}

write_agent() {
  local dir=$1 name=$2
  cat >"$dir/agent" <<EOF
#!/bin/sh
# rsh agent for cluster $name: mpirun calls it as \`agent HOST COMMAND...\`.
# Enters HOST's network namespace, gives it HOST as its hostname (own UTS
# namespace) and the cluster's hosts file (own mount namespace), and runs
# COMMAND with sh -c as ssh would. orted runs without --daemonize: a daemon
# leads a session of its own, and Linux's autogroup gives each session its own
# scheduling group, so the hosts' ranks would share the machine's cores host by
# host, as neither real hosts (each has its own cores) nor one host's ranks do.
# Its stdout goes where a daemon's would (mpirun prints the ranks' output).
host=\$1; shift
case "\$host" in $name-h[0-9]*) ;; *) echo "agent: \$host is no host of $name" >&2; exit 255 ;; esac
cmd=\$(printf ' %s' "\$@" | sed 's/ --daemonize / /')
exec ip netns exec "\$host" unshare --uts --mount --propagation private \\
  sh -c 'hostname "\$1" && mount --bind "\$2" /etc/hosts && shift 2 && exec sh -c "\$*"' \\
  agent "\$host" "$dir/hosts" "\$cmd" >/dev/null
EOF
  chmod +x "$dir/agent"
}

cmd_up() {
  local hosts=${1:-}; shift || true
  local rate=1gbit slots=1 name=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=$2; shift 2 ;;
      --slots) slots=$2; shift 2 ;;
      --name) name=$2; shift 2 ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 64 ] ||
    die "up: give the number of hosts, 1..64 (got '$hosts')"
  [[ "$slots" =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "up: --slots $slots: give a count >= 1"
  [ "$rate" = none ] || rate_bps "$rate" >/dev/null
  local reason; reason=$(why_not)
  [ -z "$reason" ] || die "cannot build a cluster here: $reason"

  mkdir -p "$kStateRoot" "$(dirname "$kLock")"
  local n
  exec 9>"$kLock"
  flock 9
  if [ -z "$name" ]; then
    n=$(free_index)
    name=cohort$n
  else
    [[ "$name" =~ ^cohort([0-9]+)$ ]] || die "up: --name $name: use cohort<N>, N < 200"
    n=${BASH_REMATCH[1]}
    [ "$n" -lt 200 ] || die "up: --name $name: N must be < 200"
    [ ! -e "$kStateRoot/$name" ] || die "up: cluster $name is already up"
    ! ip link show "$name-br" >/dev/null 2>&1 && ! ip netns list | grep -q "^$name-" ||
      die "up: devices or namespaces named $name-* exist; take them down first"
  fi
  local dir=$kStateRoot/$name
  mkdir "$dir"
  echo "cluster.sh: building $name" >&2
  echo "$hosts $slots $rate $kSubnetPrefix.$n" >"$dir/info"
  flock -u 9
  # From here, a failure takes down what was made (a global: the trap runs
  # after this function's locals are gone).
  g_cleanup=$name
  trap 'cmd_down --name "$g_cleanup" >/dev/null 2>&1 || true' EXIT

  local br=$name-br
  ip link add "$br" type bridge
  ip addr add "$kSubnetPrefix.$n.254/24" dev "$br"
  ip link set "$br" up
  { grep -v "$kSubnetPrefix\.$n\." /etc/hosts || true; } >"$dir/hosts"
  : >"$dir/hostfile"
  local i ns veth addr
  for i in $(seq 0 $((hosts - 1))); do
    ns=$name-h$i
    veth=$name-v$i
    addr=$kSubnetPrefix.$n.$((i + 1))
    ip netns add "$ns"
    ip link add "$veth" type veth peer name "$name-p$i"
    ip link set "$name-p$i" netns "$ns"
    ip netns exec "$ns" ip link set "$name-p$i" name eth0
    ip netns exec "$ns" ip addr add "$addr/24" dev eth0
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip link set eth0 up
    ip link set "$veth" master "$br"
    ip link set "$veth" up
    shape "" "$veth" "$rate"
    shape "$ns" eth0 "$rate"
    echo "$addr $ns" >>"$dir/hosts"
    echo "$ns slots=$slots" >>"$dir/hostfile"
  done
  echo "$kSubnetPrefix.$n.254 $name-root" >>"$dir/hosts"
  write_agent "$dir" "$name"
  # Tree spawn off: mpirun starts every orted itself, from the root namespace.
  # The hosts share this machine's CPUs, so a rank waiting in MPI spins on a
  # CPU its peer needs in order to send: yield when idle. And TCP messages
  # past the eager limit (64 KiB) wait for a rendezvous round trip, which
  # under that contention costs a scheduling delay per 256 KiB ring segment:
  # 1 MiB eager. Measured, mnist-large dp on 2 hosts at 1 Gbit/s: 78-80
  # images/s untuned, 92-112 eager, 157-179 eager + yield (DDP: 83).
  echo "--hostfile $dir/hostfile --mca plm_rsh_agent $dir/agent --mca plm_rsh_no_tree_spawn 1" \
    "--mca btl tcp,self,vader --mca btl_tcp_if_include $kSubnetPrefix.$n.0/24" \
    "--mca oob_tcp_if_include $kSubnetPrefix.$n.0/24 --bind-to none --oversubscribe" \
    "--mca mpi_yield_when_idle 1 --mca btl_tcp_eager_limit 1048576" \
    "--mca btl_tcp_rndv_eager_limit 1048576 --mca btl_tcp_max_send_size 1048576" \
    >"$dir/mpirun.args"
  trap - EXIT
  echo "$name"
}

# NAME from --name, $COHORT_CLUSTER, or the only cluster up.
resolve_name() {
  local name=${1:-${COHORT_CLUSTER:-}}
  if [ -z "$name" ]; then
    local up
    up=$(ls "$kStateRoot" 2>/dev/null || true)
    [ "$(echo "$up" | grep -c .)" = 1 ] || die "give --name (clusters up: ${up:-none})"
    name=$up
  fi
  echo "$name"
}

cmd_down() {
  local name=""
  [ "${1:-}" = --name ] && name=$2
  name=$(resolve_name "$name")
  [[ "$name" =~ ^cohort[0-9]+$ ]] || die "down: $name is no cluster name"
  local ns dev
  # Namespaces first: deleting one destroys its veth end, which takes the peer
  # (and both qdiscs) with it.
  for ns in $(ip netns list | awk '{print $1}' | grep "^$name-h[0-9]*$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  for dev in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep "^$name-" || true); do
    ip link del "$dev" 2>/dev/null || true
  done
  rm -rf "${kStateRoot:?}/$name"
}

cmd_run() {
  local name="" map=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) name=$2; shift 2 ;;
      --map-by) map="--map-by $2"; shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown argument $1 (put the command after --)" ;;
    esac
  done
  [ $# -gt 0 ] || die "run: give a command after --"
  name=$(resolve_name "$name")
  local dir=$kStateRoot/$name
  [ -f "$dir/mpirun.args" ] || die "run: cluster $name is not up"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # shellcheck disable=SC2046
  exec unshare --mount --propagation private sh -c \
    'mount --bind "$1" /etc/hosts && shift && exec "$@"' run "$dir/hosts" \
    mpirun $(cat "$dir/mpirun.args") $map "$@"
}

cmd_each() {
  local name="" port=29500
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) name=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --) shift; break ;;
      *) die "each: unknown argument $1 (put the command after --)" ;;
    esac
  done
  [ $# -gt 0 ] || die "each: give a command after --"
  name=$(resolve_name "$name")
  local dir=$kStateRoot/$name hosts subnet i
  [ -f "$dir/info" ] || die "each: cluster $name is not up"
  read -r hosts _ _ subnet <"$dir/info"
  g_ranks=()
  trap 'kill -TERM "${g_ranks[@]}" 2>/dev/null; exit 143' INT TERM
  for i in $(seq 0 $((hosts - 1))); do
    ip netns exec "$name-h$i" env RANK="$i" WORLD_SIZE="$hosts" LOCAL_RANK=0 \
      MASTER_ADDR="$subnet.1" MASTER_PORT="$port" GLOO_SOCKET_IFNAME=eth0 "$@" &
    g_ranks+=($!)
  done
  local left=$hosts rc=0
  while [ "$left" -gt 0 ]; do
    wait -n || { rc=$?; kill -TERM "${g_ranks[@]}" 2>/dev/null || true; wait; return "$rc"; }
    left=$((left - 1))
  done
  return 0
}

cmd_with() {
  local hosts=$1; shift
  local up_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do up_args+=("$1"); shift; done
  [ "${1:-}" = -- ] || die "with: give a command after --"
  shift
  g_cleanup=$(cmd_up "$hosts" "${up_args[@]}")
  trap 'cmd_down --name "$g_cleanup"' EXIT
  # The command runs in the background so that a signal is handled at once:
  # it is passed on, and the EXIT trap takes the cluster down.
  COHORT_CLUSTER=$g_cleanup "$@" &
  g_child=$!
  trap 'kill -TERM "$g_child" 2>/dev/null; exit 130' INT
  trap 'kill -TERM "$g_child" 2>/dev/null; exit 143' TERM
  wait "$g_child"
}

main() {
  local sub=${1:-}; shift || true
  case "$sub" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    run) cmd_run "$@" ;;
    with) cmd_with "$@" ;;
    each) cmd_each "$@" ;;
    args)
      local name=""; [ "${1:-}" = --name ] && name=$2
      cat "$kStateRoot/$(resolve_name "$name")/mpirun.args" ;;
    dir)
      local name=""; [ "${1:-}" = --name ] && name=$2
      echo "$kStateRoot/$(resolve_name "$name")" ;;
    list)
      local d
      for d in "$kStateRoot"/cohort*; do
        [ -f "$d/info" ] && echo "$(basename "$d") $(cat "$d/info")"
      done
      true ;;
    check)
      local reason; reason=$(why_not)
      [ -z "$reason" ] || { echo "$reason"; exit 1; } ;;
    *) usage ;;
  esac
}

main "$@"
