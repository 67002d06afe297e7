"""The test rollout's load balancer, plugged in with verl's `rollout.router_config_path` (a YAML
naming `router_class`, router.yaml) and satisfying verl's `RequestLoadBalancer` protocol
(verl/workers/rollout/router.py). The test runs one server, so it routes every request there.

verl's default balancer would do the same, but its Ray actor imports all of verl (seconds of CPU
and most of a GB per process); this one imports nothing.
"""

from __future__ import annotations


class OneServerRouter:
    def __init__(self, servers: dict, config: dict | None = None):
        self.servers = dict(servers)
        self.inflight = dict.fromkeys(self.servers, 0)

    def acquire_server(self, request_id: str, **extra):
        if not self.servers:
            raise RuntimeError("no rollout server registered")
        server_id = min(self.inflight, key=self.inflight.get)
        self.inflight[server_id] += 1
        return server_id, self.servers[server_id]

    def release_server(self, server_id: str, request_id: str | None = None) -> None:
        if server_id in self.inflight:
            self.inflight[server_id] = max(0, self.inflight[server_id] - 1)

    def require_acquire_fields(self) -> list[str]:
        return []

    def require_release_fields(self) -> list[str]:
        return []

    def add_servers(self, servers: dict) -> None:
        self.servers.update(servers)
        for server_id in servers:
            self.inflight.setdefault(server_id, 0)

    def remove_servers(self, server_ids: list[str]) -> None:
        for server_id in server_ids:
            self.servers.pop(server_id, None)
            self.inflight.pop(server_id, None)

    def get_all_servers(self) -> list[str]:
        return list(self.servers)

    def get_status(self) -> dict:
        total = sum(self.inflight.values())
        return {"servers": list(self.servers), "total_inflight": total,
                "active_servers": len(self.servers)}  # fmt: skip

    def clear_sticky_cache(self) -> dict:
        return {"cleared_entries": 0, "server_loads": dict(self.inflight)}

    def get_total_inflight(self) -> int:
        return sum(self.inflight.values())
