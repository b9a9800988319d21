# Shared by the benchmarks that talk to a private sshd (bench/sync.sh,
# bench/clone_loose.sh); sourced. `make_keys` writes a host key and authorized_keys in
# $SERVER and the user's key in $CLIENT_HOME/.ssh (both set by the caller);
# `start_sshd` starts sshd -D on a free loopback port with them, retrying when the port
# was taken meanwhile; it sets PORT and SSHD_PID. `client_config ALIAS:PORT...` writes
# the client's known_hosts and ssh config, one Host block per alias on 127.0.0.1.

make_keys() {
  mkdir -p "$SERVER" "$CLIENT_HOME/.ssh"
  mkdir -p /run/sshd 2>/dev/null || true # privilege separation directory sshd insists on
  chmod 700 "$CLIENT_HOME/.ssh"
  ssh-keygen -q -t ed25519 -N '' -C baton-bench-host -f "$SERVER/host_ed25519"
  ssh-keygen -q -t ed25519 -N '' -C baton-bench-user -f "$CLIENT_HOME/.ssh/id_ed25519"
  cp "$CLIENT_HOME/.ssh/id_ed25519.pub" "$SERVER/authorized_keys"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_sshd() {
  local attempt
  for attempt in 1 2 3 4 5; do
    PORT=$(free_port)
    cat >"$SERVER/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $PORT
HostKey $SERVER/host_ed25519
PidFile $SERVER/sshd.pid
AuthorizedKeysFile $SERVER/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
MaxStartups 100
MaxSessions 100
EOF
    /usr/sbin/sshd -D -e -f "$SERVER/sshd_config" </dev/null >/dev/null 2>"$SERVER/sshd.log" &
    SSHD_PID=$!
    local i
    for ((i = 0; i < 200; i++)); do
      if grep -q "Server listening on 127.0.0.1 port $PORT" "$SERVER/sshd.log"; then
        return 0
      fi
      kill -0 "$SSHD_PID" 2>/dev/null || break
      sleep 0.05
    done
    kill "$SSHD_PID" 2>/dev/null || true
    wait "$SSHD_PID" 2>/dev/null || true
    SSHD_PID=
    grep -q "Address already in use" "$SERVER/sshd.log" || break
  done
  echo "sshd did not start; its log:" >&2
  cat "$SERVER/sshd.log" >&2
  exit 1
}

client_config() {
  local key_type key_b64 alias_port
  read -r key_type key_b64 _ <"$SERVER/host_ed25519.pub"
  for alias_port in "$@"; do
    printf '[127.0.0.1]:%s %s %s\n' "${alias_port#*:}" "$key_type" "$key_b64"
  done >"$CLIENT_HOME/.ssh/known_hosts"
  for alias_port in "$@"; do
    cat <<EOF
Host ${alias_port%%:*}
  HostName 127.0.0.1
  Port ${alias_port#*:}
  User $(id -un)
  IdentityFile $CLIENT_HOME/.ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $CLIENT_HOME/.ssh/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
EOF
  done >"$CLIENT_HOME/.ssh/config"
  chmod 600 "$CLIENT_HOME/.ssh/config" "$CLIENT_HOME/.ssh/known_hosts"
}
