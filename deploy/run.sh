#!/usr/bin/env bash
# alibi-viz for a class: N Streamlit replicas on loopback behind one nginx (deploy/README.md).
#
#   deploy/run.sh start [--replicas N] [--port P] [--listen ADDR]   # default 2 replicas, 0.0.0.0:8080
#   deploy/run.sh status                                             # exit 0 when all is up
#   deploy/run.sh stop
#   deploy/run.sh kill-replica K      # SIGKILL replica K (a drill, and the failover test)
#   deploy/run.sh start-replica K     # start replica K again on its port
#   deploy/run.sh start --replicas-only [--replicas N]   # several machines: an app host's replicas
#
# Environment (all optional; the tests use them to run on free ports in a temporary folder):
#   ALIBI_VIZ_RUN_DIR        pid files, logs, rendered nginx.conf, temp folders (deploy/run)
#   ALIBI_VIZ_REPLICA_PORTS  the replicas' loopback ports, e.g. "8601 8602" (else 8601, 8602, ...)
#   ALIBI_VIZ_REPLICA_ADDRESS  where the replicas listen (127.0.0.1); on an app host of a class on
#                            several machines, 0.0.0.0 or the host's address, which nginx reaches
#   ALIBI_VIZ_UPSTREAMS      several machines, on the front host: the replicas as ADDRESS:PORT, e.g.
#                            "10.0.0.2:8601 10.0.0.3:8601"; `start` runs nginx only, in front of them
#   ALIBI_VIZ_PORT           nginx's port when --port is not given (8080)
#   ALIBI_VIZ_LISTEN         nginx's address when --listen is not given (0.0.0.0: the class network)
#   ALIBI_VIZ_STATIC_CACHE   where the precompressed copy of Streamlit's static files is kept,
#                            made once per Streamlit version: deploy/.static-cache, or
#                            /var/cache/alibi-viz when started as root (see WORKERS below)
#   ALIBI_VIZ_PYTHON         the interpreter with streamlit installed (.venv/bin/python)
#   ALIBI_VIZ_NGINX          the nginx binary (/usr/sbin/nginx)
#   ALIBI_VIZ_TIMING_LOG     passed to every replica: one JSON line per script run (alibi_viz_app/ui.py)
#   ALIBI_VIZ_ALLOW_CUSTOM_PATHS  passed through; 0 unless set (see start_replica)
#   ALIBI_VIZ_WARM_UP        0: skip the first run of each page in each replica (alibi_viz_app/warm_up.py)
#   ALIBI_VIZ_CLASS_STORE    the class store every replica uses (alibi_viz_app/class_store.py): unset,
#                            one SQLite file shared by all replicas, class.sqlite3 in
#                            ALIBI_VIZ_DATA_DIR; redis://host:port/db for replicas on several machines
#   ALIBI_VIZ_DATA_DIR       where that SQLite file lives: $ALIBI_VIZ_RUN_DIR/data unless set
#   ALIBI_VIZ_MEMORY_BUDGET_MB  the memory one model run of a replica may use (1024 unless set):
#                            a fixed budget, since N replicas share the machine; alone, the
#                            app takes a quarter of the memory available (models/heads.py)
# Runs as any user: nothing is written outside the run folder and the static cache.
#
# WORKERS. nginx's worker processes read the static copy and write nginx's temp folders. Started
# by an ordinary user they run as that user, who can read the checkout. Started as root they
# drop to nobody, who cannot enter a checkout under a private (0700) folder, such as a home
# directory or a mktemp -d: so as root the static copy and the workers' temp folder are kept in
# /var/cache/alibi-viz (root's, readable by all; the temp folder is nobody's, one per start,
# removed by stop). `start` checks that the workers can read and write there; `status` says
# where they read and as whom.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${ALIBI_VIZ_RUN_DIR:-$ROOT/deploy/run}"
if [[ "$(id -u)" == 0 ]]; then
    AS_ROOT=1
    WORKER_USER=nobody
    WORKER_GROUP="$(getent group nogroup >/dev/null && echo nogroup || echo nobody)"
    STATIC_CACHE="${ALIBI_VIZ_STATIC_CACHE:-/var/cache/alibi-viz}"
else
    AS_ROOT=0
    WORKER_USER="$(id -un)"
    WORKER_GROUP="$(id -gn)"
    STATIC_CACHE="${ALIBI_VIZ_STATIC_CACHE:-$ROOT/deploy/.static-cache}"
fi
PYTHON="${ALIBI_VIZ_PYTHON:-$ROOT/.venv/bin/python}"
NGINX="${ALIBI_VIZ_NGINX:-/usr/sbin/nginx}"
TEMPLATE="$ROOT/deploy/nginx.conf"
HEALTH_TIMEOUT=180  # seconds for one replica to answer /_stcore/health (torch import, 2 busy cores)
REPLICA_ADDRESS="${ALIBI_VIZ_REPLICA_ADDRESS:-127.0.0.1}"
REPLICA_HOST="${REPLICA_ADDRESS/#0.0.0.0/127.0.0.1}"  # where this machine reaches its replicas

die() { echo "run.sh: $*" >&2; exit 1; }
say() { echo "run.sh: $*"; }

# ------------------------------------------------------------------------------ processes

alive() {  # alive PIDFILE NAME: the pid file names a running process whose command line has NAME
    local pid cmdline
    [[ -s "$1" ]] || return 1
    pid="$(<"$1")"
    # A zombie's command line is empty: it counts as gone. A reused pid fails the NAME check.
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *"$2"* ]]
}

stop_pid() {  # stop_pid PIDFILE NAME SIGNAL: signal, wait up to 10 s, then SIGKILL
    local pidfile="$1" name="$2" signal="$3" pid i
    if alive "$pidfile" "$name"; then
        pid="$(<"$pidfile")"
        kill "-$signal" "$pid" 2>/dev/null || true
        for i in $(seq 100); do alive "$pidfile" "$name" || break; sleep 0.1; done
        if alive "$pidfile" "$name"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
    fi
    rm -f "$pidfile"
}

healthy() {  # healthy URL: answers 200 "ok" within 2 s
    if command -v curl >/dev/null; then
        [[ "$(curl -fsS --max-time 2 "$1" 2>/dev/null)" == ok ]]
    else
        "$PYTHON" -c 'import sys, urllib.request
sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).read() != b"ok")' "$1" 2>/dev/null
    fi
}

replica_ports() {  # the port of each replica, one a line, from the file written by start
    cat "$RUN_DIR/replicas" 2>/dev/null || true
}

upstreams() {  # ADDRESS:PORT of each replica nginx sends to: ALIBI_VIZ_UPSTREAMS, else this host's
    if [[ -n "${ALIBI_VIZ_UPSTREAMS:-}" ]]; then printf '%s\n' $ALIBI_VIZ_UPSTREAMS
    else replica_ports | sed "s/^/$REPLICA_HOST:/"; fi
}

# ------------------------------------------------------------------------------ replicas

start_replica() {  # start_replica K PORT: one `streamlit run`, detached, its pid in rK.pid
    local k="$1" port="$2"
    # Replicas listen on loopback only: students reach them through nginx. The app would take
    # loopback for "a local single user" and let visitors load any model folder, so custom
    # paths are off unless the teacher says otherwise (alibi_viz_app/ui.py: custom_paths_allowed).
    # One cookie secret for all replicas, so a cookie signed by one is valid on another
    # after a failover (environment, not argv: `ps` shows argv to every user).
    (
        cd "$ROOT"
        export ALIBI_VIZ_REPLICA="r$k"
        export ALIBI_VIZ_ALLOW_CUSTOM_PATHS="${ALIBI_VIZ_ALLOW_CUSTOM_PATHS:-0}"
        export ALIBI_VIZ_MEMORY_BUDGET_MB="${ALIBI_VIZ_MEMORY_BUDGET_MB:-1024}"
        # One class store for every replica: a class's answers live there, never in a
        # replica's memory, so a student moved to another replica keeps them.
        export ALIBI_VIZ_DATA_DIR="${ALIBI_VIZ_DATA_DIR:-$RUN_DIR/data}"
        if [[ -n "${ALIBI_VIZ_CLASS_STORE:-}" ]]; then export ALIBI_VIZ_CLASS_STORE; fi
        STREAMLIT_SERVER_COOKIE_SECRET="$(<"$RUN_DIR/cookie_secret")"
        export STREAMLIT_SERVER_COOKIE_SECRET
        # setsid: its own session, so closing the teacher's terminal does not stop it. The
        # shell writes its own pid, then becomes streamlit (exec), so the pid file is exact.
        setsid sh -c 'echo $$ > "$0"; exec "$@"' "$RUN_DIR/r$k.pid" \
            "$PYTHON" -m streamlit run alibi_viz_app/main.py --server.port "$port" \
            --server.address "$REPLICA_ADDRESS" --server.headless true \
            --server.fileWatcherType none --browser.gatherUsageStats false \
            </dev/null >"$RUN_DIR/logs/r$k.log" 2>&1 &
    )
    local i
    for i in $(seq 50); do [[ -s "$RUN_DIR/r$k.pid" ]] && break; sleep 0.1; done
}

wait_replica() {  # wait_replica K PORT: until /_stcore/health answers, or fail
    local k="$1" port="$2" deadline=$((SECONDS + HEALTH_TIMEOUT))
    until healthy "http://$REPLICA_HOST:$port/_stcore/health"; do
        alive "$RUN_DIR/r$k.pid" streamlit || die "replica r$k exited; see $RUN_DIR/logs/r$k.log"
        ((SECONDS < deadline)) || die "replica r$k not healthy after ${HEALTH_TIMEOUT} s; see $RUN_DIR/logs/r$k.log"
        sleep 0.5
    done
}

warm_up() {  # warm_up PORT...: each replica runs the landing page and Model heads once
    local port pids=()
    for port in "$@"; do
        { "$PYTHON" -m alibi_viz_app.warm_up "$port" "" \
            && "$PYTHON" -m alibi_viz_app.warm_up "$port" model; } &
        pids+=($!)
    done
    local pid
    for pid in "${pids[@]}"; do wait "$pid" || say "warning: a warm-up run failed (see above)"; done
}

# ------------------------------------------------------------------------------ nginx

as_worker() {  # as_worker CMD...: run CMD as nginx's workers will run (see WORKERS above)
    if ((AS_ROOT)) && command -v setpriv >/dev/null; then
        setpriv --reuid="$WORKER_USER" --regid="$WORKER_GROUP" --clear-groups -- "$@"
    elif ((AS_ROOT)) && command -v runuser >/dev/null; then
        runuser -u "$WORKER_USER" -g "$WORKER_GROUP" -- "$@"
    else
        "$@"  # as root without util-linux the check is root's own, which passes
    fi
}

worker_tmp() {  # prints the workers' temp folder for this start (recorded in worker_tmp)
    local tmp
    if ((AS_ROOT)); then
        mkdir -p "$STATIC_CACHE"
        tmp="$(mktemp -d "$STATIC_CACHE/nginx-tmp.XXXXXX")"
        chown "$WORKER_USER:$WORKER_GROUP" "$tmp"
    else
        tmp="$RUN_DIR/tmp"
        mkdir -p "$tmp"
    fi
    printf '%s\n' "$tmp" >"$RUN_DIR/worker_tmp"
    echo "$tmp"
}

remove_worker_tmp() {  # the temp folder that start made under the static cache, if any
    local tmp
    tmp="$(cat "$RUN_DIR/worker_tmp" 2>/dev/null)" || return 0
    # Only a folder worker_tmp made (never $RUN_DIR/tmp, never anything else named there).
    if [[ "$(basename "$tmp")" == nginx-tmp.?????? && -d "$tmp" && ! -L "$tmp" ]]; then
        # nginx's last worker may still be leaving files there for a moment: try again once.
        rm -rf "$tmp" 2>/dev/null || { sleep 0.5; rm -rf "$tmp"; }
    fi
    rm -f "$RUN_DIR/worker_tmp"
}

check_workers() {  # check_workers STATIC_ROOT TMP: nginx's workers can read the one, write the other
    local static_root="$1" tmp="$2" fix
    fix="set ALIBI_VIZ_STATIC_CACHE to a folder that every user can enter (all its parents too)"
    as_worker test -r "$static_root/index.html" || die "nginx's workers (user $WORKER_USER) cannot \
read $static_root: a folder above it is private; $fix"
    as_worker test -w "$tmp" -a -x "$tmp" || die "nginx's workers (user $WORKER_USER) cannot \
write their temp folder $tmp; $fix"
}

static_cache() {  # prints the precompressed copy of Streamlit's static folder, made if missing
    local src version target tmp
    src="$("$PYTHON" -c 'import os, streamlit; print(os.path.join(os.path.dirname(streamlit.__file__), "static"))')"
    version="$("$PYTHON" -c 'import streamlit; print(streamlit.__version__)')"
    [[ -f "$src/index.html" ]] || die "no Streamlit static folder at $src"
    target="$STATIC_CACHE/streamlit-$version"
    if [[ ! -f "$target/.complete" ]]; then
        mkdir -p "$STATIC_CACHE"  # root's umask: 755, which nginx's workers can enter
        tmp="$(mktemp -d "$STATIC_CACHE/.building.XXXXXX")"
        cp -R --preserve=timestamps "$src/." "$tmp/"
        # gzip -9 once here, so nginx never compresses the bundle per request (gzip_static).
        find "$tmp" -type f \( -name '*.js' -o -name '*.css' -o -name '*.json' -o -name '*.svg' \
            -o -name '*.html' -o -name '*.txt' -o -name '*.map' -o -name '*.ttf' \) -size +1k \
            -print0 | xargs -0 -r -n 16 -P 2 gzip -9 -k -n
        touch "$tmp/.complete"
        chmod -R a+rX "$tmp"
        # Another start may have built it meanwhile: keep whichever landed first.
        mv -T "$tmp" "$target" 2>/dev/null || rm -rf "$tmp"
    fi
    echo "$target"
}

render_conf() {  # render_conf LISTEN STATIC_ROOT TMP: deploy/nginx.conf -> $RUN_DIR/nginx.conf
    local listen="$1" static_root="$2" tmp="$3" conf servers="" names="" user_line="" upstream k=0
    while read -r upstream; do
        k=$((k + 1))
        servers+="server $upstream max_fails=1 fail_timeout=10s;"$'\n        '
        names+="\"~${upstream//./\\.}\$\" r$k;"$'\n        '
    done < <(upstreams)
    # As root the master drops its workers to nobody (see WORKERS above).
    ((AS_ROOT)) && user_line="user $WORKER_USER $WORKER_GROUP;"
    conf="$(<"$TEMPLATE")"
    conf="${conf//@USER_LINE@/$user_line}"
    conf="${conf//@RUN_DIR@/$RUN_DIR}"
    conf="${conf//@MIME_TYPES@/${ALIBI_VIZ_MIME_TYPES:-/etc/nginx/mime.types}}"
    conf="${conf//@LISTEN@/$listen}"
    conf="${conf//@STATIC_ROOT@/$static_root}"
    conf="${conf//@WORKER_TMP@/$tmp}"
    conf="${conf//@UPSTREAM_SERVERS@/$servers}"
    conf="${conf//@REPLICA_NAMES@/$names}"
    printf '%s\n' "$conf" >"$RUN_DIR/nginx.conf"
    printf '%s\n' "$static_root" >"$RUN_DIR/static_root"
}

nginx_cmd() { "$NGINX" -p "$RUN_DIR/" -e "$RUN_DIR/logs/error.log" -c "$RUN_DIR/nginx.conf" "$@"; }

# ------------------------------------------------------------------------------ commands

cmd_start() {
    local replicas=2 port="${ALIBI_VIZ_PORT:-8080}" listen="${ALIBI_VIZ_LISTEN:-0.0.0.0}" replicas_only=0
    while (($#)); do
        case "$1" in
            --replicas) replicas="${2:?--replicas N}"; shift 2 ;;
            --replicas-only) replicas_only=1; shift ;;  # an app host: nginx runs on the front host
            --port) port="${2:?--port P}"; shift 2 ;;
            --listen) listen="${2:?--listen ADDRESS}"; shift 2 ;;
            *) die "unknown option $1 (start [--replicas N] [--port P] [--listen ADDR])" ;;
        esac
    done
    [[ "$replicas" =~ ^[1-9][0-9]*$ ]] || die "--replicas wants a positive number"
    ((replicas_only)) || [[ -x "$NGINX" ]] || die "nginx not found at $NGINX (make nginx, or apt-get install nginx)"
    [[ -x "$PYTHON" ]] || die "no python at $PYTHON (make install)"
    local pidfile
    for pidfile in "$RUN_DIR/nginx.pid" "$RUN_DIR"/r*.pid; do
        if alive "$pidfile" nginx || alive "$pidfile" streamlit; then
            die "already running from $RUN_DIR (deploy/run.sh status; deploy/run.sh stop)"
        fi
        rm -f "$pidfile"  # left by a replica that was killed, or by a reboot
    done
    remove_worker_tmp  # left by a start that was killed, or by a reboot

    local ports=()
    if [[ -n "${ALIBI_VIZ_UPSTREAMS:-}" ]] && ((!replicas_only)); then
        :  # the front host of several machines: no replica here, nginx sends to the app hosts
    elif [[ -n "${ALIBI_VIZ_REPLICA_PORTS:-}" ]]; then
        read -r -a ports <<<"$ALIBI_VIZ_REPLICA_PORTS"
        ((${#ports[@]} >= replicas)) || die "ALIBI_VIZ_REPLICA_PORTS has fewer than $replicas ports"
        ports=("${ports[@]:0:replicas}")
    else
        local k
        for ((k = 0; k < replicas; k++)); do ports+=($((8601 + k))); done
    fi

    mkdir -p "$RUN_DIR/logs"
    printf '%s' "${ports[@]/%/$'\n'}" >"$RUN_DIR/replicas"  # none on a front host
    printf '%s\n' "$REPLICA_HOST" >"$RUN_DIR/replica_host"  # where status asks them
    upstreams >"$RUN_DIR/upstreams"  # where nginx sends (status asks them on a front host)
    if ((replicas_only)); then touch "$RUN_DIR/replicas_only"; else rm -f "$RUN_DIR/replicas_only"; fi
    (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN_DIR/cookie_secret")
    # Whatever fails from here on (die, or set -e), stop what was started: no orphans.
    trap 'echo "run.sh: start failed, stopping what was started" >&2; cmd_stop >/dev/null' EXIT

    local k
    for k in "${!ports[@]}"; do start_replica $((k + 1)) "${ports[k]}"; done
    local static_root
    static_root="$(static_cache)"  # meanwhile the replicas import torch
    for k in "${!ports[@]}"; do wait_replica $((k + 1)) "${ports[k]}"; done
    [[ "${ALIBI_VIZ_WARM_UP:-1}" == 0 ]] || warm_up "${ports[@]}"
    if ((replicas_only)); then
        trap - EXIT
        say "${#ports[@]} replica(s) on $REPLICA_ADDRESS:${ports[*]}; nginx runs on the front host"
        return
    fi

    local tmp
    tmp="$(worker_tmp)"
    check_workers "$static_root" "$tmp"
    render_conf "$listen:$port" "$static_root" "$tmp"
    nginx_cmd -t -q || die "nginx rejected $RUN_DIR/nginx.conf; see $RUN_DIR/logs/error.log"
    nginx_cmd || die "nginx did not start; see $RUN_DIR/logs/error.log"
    local host="$listen"
    [[ "$host" == 0.0.0.0 ]] && host=127.0.0.1
    local deadline=$((SECONDS + 30))
    until healthy "http://$host:$port/healthz"; do
        ((SECONDS < deadline)) || die "nginx does not answer /healthz; see $RUN_DIR/logs/error.log"
        sleep 0.2
    done
    trap - EXIT

    if ((${#ports[@]})); then say "${#ports[@]} replica(s) on 127.0.0.1:${ports[*]}, nginx on $listen:$port"
    else say "nginx on $listen:$port, in front of $(upstreams | tr '\n' ' ')"; fi
    if [[ "$listen" == 0.0.0.0 ]]; then
        local ip
        for ip in $(hostname -I 2>/dev/null); do  # IPv4 only: nginx listens on 0.0.0.0
            [[ "$ip" == *:* ]] || say "students open http://$ip:$port/"
        done
        # The teacher's link is the class's first address: the projector shows the students
        # the code, the link and the QR code of whatever address the teacher opened.
        for ip in $(hostname -I 2>/dev/null); do
            if [[ "$ip" != *:* ]]; then
                say "the teacher opens http://$ip:$port/lesson?class=new&present=1"
                break
            fi
        done
    else
        say "open http://$host:$port/"
        say "the teacher opens http://$host:$port/lesson?class=new&present=1"
    fi
    say "static files from $static_root, read by nginx's workers as $WORKER_USER"
    say "logs: $RUN_DIR/logs; stop with deploy/run.sh stop"
}

cmd_stop() {
    # nginx first (no new requests reach a stopping replica); TERM is nginx's fast shutdown,
    # which does not wait for the students' open websockets as QUIT would.
    stop_pid "$RUN_DIR/nginx.pid" nginx TERM
    local pidfile
    for pidfile in "$RUN_DIR"/r*.pid; do
        [[ -e "$pidfile" ]] && stop_pid "$pidfile" streamlit TERM
    done
    remove_worker_tmp
    say "stopped"
}

cmd_status() {
    # One machine: its replicas and nginx. An app host (start --replicas-only): its replicas,
    # on the address they listen on. The front host: nginx, and each app host's replica that
    # it sends to, asked over the network as nginx asks it.
    local ok=0 k=0 port state host upstream
    host="$(cat "$RUN_DIR/replica_host" 2>/dev/null || echo 127.0.0.1)"
    while read -r port; do
        k=$((k + 1))
        if ! alive "$RUN_DIR/r$k.pid" streamlit; then state="not running"; ok=1
        elif healthy "http://$host:$port/_stcore/health"; then state="healthy"
        else state="running, not answering"; ok=1; fi
        echo "replica r$k  $host:$port  $state"
    done < <(replica_ports)
    if [[ -e "$RUN_DIR/replicas_only" ]]; then
        ((k > 0)) || { echo "not started (no $RUN_DIR/replicas)"; return 1; }
        echo "nginx        on the front host (this is an app host)"
        return "$ok"
    fi
    if ((k == 0)); then
        [[ -s "$RUN_DIR/upstreams" ]] || { echo "not started (no $RUN_DIR/replicas)"; return 1; }
        while read -r upstream; do  # the front host of several machines
            k=$((k + 1))
            if healthy "http://$upstream/_stcore/health"; then state="healthy"
            else state="not answering"; ok=1; fi
            echo "upstream r$k  $upstream  $state"
        done <"$RUN_DIR/upstreams"
    fi
    if alive "$RUN_DIR/nginx.pid" nginx; then
        local listen
        listen="$(awk '/^ *listen /{sub(";", "", $2); print $2; exit}' "$RUN_DIR/nginx.conf")"
        if healthy "http://${listen/0.0.0.0/127.0.0.1}/healthz"; then state="ok"
        else state="failing: no replica answers"; ok=1; fi
        echo "nginx        $listen  /healthz $state"
        local static_root user
        static_root="$(cat "$RUN_DIR/static_root" 2>/dev/null || echo '?')"
        user="$(awk '/^ *user /{print $2; exit}' "$RUN_DIR/nginx.conf")"
        [[ -n "$user" ]] || user="$(id -un)"  # no user directive: the workers run as the starter
        if as_worker test -r "$static_root/index.html"; then state="readable"
        else state="NOT readable"; ok=1; fi
        echo "static       $static_root  $state by nginx's workers (user $user)"
    else
        echo "nginx        not running"; ok=1
    fi
    return "$ok"
}

replica_arg() {  # replica_arg K: check K names a started replica; prints its port
    local port
    [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] || die "which replica? (1, 2, ...)"
    port="$(replica_ports | sed -n "${1}p")"
    [[ -n "$port" ]] || die "no replica r$1"
    echo "$port"
}

cmd_kill_replica() {
    replica_arg "${1:-}" >/dev/null
    alive "$RUN_DIR/r$1.pid" streamlit || die "replica r$1 is not running"
    kill -KILL "$(<"$RUN_DIR/r$1.pid")"
    say "killed replica r$1 (SIGKILL)"
}

cmd_start_replica() {
    local port
    port="$(replica_arg "${1:-}")"
    alive "$RUN_DIR/r$1.pid" streamlit && die "replica r$1 is running"
    start_replica "$1" "$port"
    wait_replica "$1" "$port"
    say "replica r$1 is back on 127.0.0.1:$port (nginx tries it again within 10 s)"
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    kill-replica) cmd_kill_replica "${2:-}" ;;
    start-replica) cmd_start_replica "${2:-}" ;;
    *) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
