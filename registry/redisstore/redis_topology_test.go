package redisstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolmesh/toolmesh/registry"
)

// The store through a Redis Cluster and through Sentinel, on real
// redis-server processes on 127.0.0.1 (see redis_server_test.go).

// waitFor polls cond every 50ms until it holds or bound has passed; what
// says what was awaited, for the failure message.
func waitFor(t testing.TB, bound time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last state: %s", what, bound, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startCluster starts n cluster-enabled redis-servers with password pw and
// makes them one cluster of n masters, the slots split evenly, without
// redis-cli: CLUSTER ADDSLOTSRANGE on each node, CLUSTER MEET from the
// first.
func startCluster(t *testing.T, n int, pw string) []*redisServer {
	t.Helper()
	nodes := make([]*redisServer, n)
	busPorts := make([]int, n)
	for i := range nodes {
		dir := t.TempDir()
		busPorts[i] = freePort(t)
		nodes[i] = startRedisWith(t, pw, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			// The bus port defaults to port+10000, which may not be free or
			// even exist; pick one.
			"--cluster-port", strconv.Itoa(busPorts[i]),
			"--cluster-node-timeout", "5000",
		}, "")
	}
	ctx := t.Context()
	const slots = 16384
	for i, node := range nodes {
		c := node.client()
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if err := c.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, node.addr(), err)
		}
		if i > 0 {
			first := nodes[0].client()
			if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", node.port, busPorts[i]).Err(); err != nil {
				t.Fatalf("CLUSTER MEET %s: %v", node.addr(), err)
			}
			first.Close()
		}
		c.Close()
	}
	for _, node := range nodes {
		c := node.client()
		waitFor(t, 20*time.Second, "cluster state ok on "+node.addr(), func() (bool, string) {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err.Error()
			}
			ok := strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n))
			return ok, info
		})
		c.Close()
	}
	return nodes
}

// startSentinel starts a sentinel (password spw, empty for none) that
// watches master as masterName (quorum 1: one sentinel decides alone).
func startSentinel(t *testing.T, masterName string, master *redisServer, spw string) *redisServer {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	lines := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", masterName, master.port),
		fmt.Sprintf("sentinel down-after-milliseconds %s 5000", masterName),
		fmt.Sprintf("sentinel failover-timeout %s 20000", masterName),
	}
	if master.password != "" {
		lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", masterName, master.password))
	}
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startRedisWith(t, spw, nil, conf)
}

// storeRoundTrip writes snapshots through w and reads them back through r,
// a store on a new client as in a new process's warm start.
func storeRoundTrip(t *testing.T, w, r *RedisStore, snaps []*registry.Snapshot) {
	t.Helper()
	ctx := t.Context()
	for i, err := range w.Sync(ctx, snaps) {
		if err != nil {
			t.Fatalf("Sync(%s) = %v", snaps[i].Route, err)
		}
	}
	listing := &registry.Listing{Routes: []registry.Route{{Key: "alpha", ToolServices: []registry.ToolService{{Name: "svc", URL: "http://svc"}}}}}
	if err := w.SaveListing(ctx, listing); err != nil {
		t.Fatalf("SaveListing() = %v", err)
	}
	routes := make([]string, len(snaps))
	for i, s := range snaps {
		routes[i] = s.Route
	}
	got, errs := r.LoadMany(ctx, routes)
	for i, s := range snaps {
		if errs[i] != nil || got[i] == nil || got[i].Version != s.Version {
			t.Errorf("warm start: %s = %v, %v; want version %s", s.Route, got[i], errs[i], s.Version)
		}
	}
	if l, err := r.LoadListing(ctx); err != nil || l == nil || len(l.Routes) != 1 || l.Routes[0].Key != "alpha" {
		t.Errorf("LoadListing() = %+v, %v", l, err)
	}
	if st := r.Status(); !st.Reachable || st.LastError != "" {
		t.Errorf("status = %+v", st)
	}
}

func TestRedisStoreCluster(t *testing.T) {
	const pw = "clu-pw"
	nodes := startCluster(t, 3, pw)
	url := fmt.Sprintf("redis+cluster://:%s@%s?addr=%s&addr=%s", pw, nodes[0].addr(), nodes[1].addr(), nodes[2].addr())
	w := newRedisStore(t, nodes[0], RedisOptions{URL: url})
	// A new process that knows one seed node only finds the others.
	r := newRedisStore(t, nodes[0], RedisOptions{URL: fmt.Sprintf("redis+cluster://:%s@%s", pw, nodes[2].addr())})
	if want := "redis+cluster://" + nodes[2].addr(); r.Status().Target != want {
		t.Errorf("target = %q, want %q", r.Status().Target, want)
	}

	var snaps []*registry.Snapshot
	for i := range 12 {
		snaps = append(snaps, routeSnap(t, fmt.Sprintf("route%d", i), "t_one"))
	}
	storeRoundTrip(t, w, r, snaps)

	// The keys are spread over the masters: the client routed them by slot
	// rather than writing everything to the first node.
	holding := 0
	for _, n := range nodes {
		c := n.client()
		if k, err := c.DBSize(t.Context()).Result(); err != nil {
			t.Fatal(err)
		} else if k > 0 {
			holding++
		}
		c.Close()
	}
	if holding < 2 {
		t.Errorf("the route keys are on %d of 3 masters", holding)
	}
}

func TestRedisStoreSentinel(t *testing.T) {
	const (
		name = "toolmesh-test"
		pw   = "data-pw"     // master and replica
		spw  = "sentinel-pw" // the sentinel
	)
	master := startRedisWith(t, pw, []string{"--masterauth", pw}, "")
	replica := startRedisWith(t, pw, []string{"--masterauth", pw, "--replicaof", "127.0.0.1", strconv.Itoa(master.port)}, "")
	sentinel := startSentinel(t, name, master, spw)
	ctx := t.Context()

	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr(), Password: spw, DisableIdentity: true})
	defer sc.Close()
	// A failover needs a replica the sentinel has seen in sync.
	waitFor(t, 20*time.Second, "the sentinel sees the replica in sync", func() (bool, string) {
		reps, err := sc.Replicas(ctx, name).Result()
		if err != nil {
			return false, err.Error()
		}
		for _, r := range reps {
			if r["port"] == strconv.Itoa(replica.port) && r["flags"] == "slave" && r["master-link-status"] == "ok" {
				return true, ""
			}
		}
		return false, fmt.Sprint(reps)
	})

	// The user info authenticates to the sentinel, ?password= to the
	// master; a wrong sentinel password must fail, so the mapping is tested.
	url := fmt.Sprintf("redis+sentinel://:%s@%s?master_name=%s&password=%s", spw, sentinel.addr(), name, pw)
	w := newRedisStore(t, master, RedisOptions{URL: url})
	r := newRedisStore(t, master, RedisOptions{URL: url})
	if want := fmt.Sprintf("redis+sentinel://%s?master_name=%s", sentinel.addr(), name); w.Status().Target != want {
		t.Errorf("target = %q, want %q", w.Status().Target, want)
	}
	alpha, beta := routeSnap(t, "alpha", "a_one"), routeSnap(t, "beta", "b_one")
	storeRoundTrip(t, w, r, []*registry.Snapshot{alpha, beta})
	mc := master.client()
	defer mc.Close()
	if v, _ := mc.HGet(ctx, "toolmesh:route:alpha", "version").Result(); v != alpha.Version {
		t.Fatalf("the master holds alpha version %q, want %q", v, alpha.Version)
	}
	bad := newRedisStore(t, master, RedisOptions{URL: fmt.Sprintf("redis+sentinel://:nope@%s?master_name=%s&password=%s", sentinel.addr(), name, pw)})
	if _, err := bad.Load(ctx, "alpha"); err == nil {
		t.Error("Load through a sentinel with the wrong password succeeded")
	}

	// Failover: the replica must have everything before it is promoted.
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	waitFor(t, 20*time.Second, "SENTINEL FAILOVER accepted", func() (bool, string) {
		err := sc.Failover(ctx, name).Err()
		return err == nil, fmt.Sprint(err)
	})
	waitFor(t, 30*time.Second, "the sentinel names the replica as master", func() (bool, string) {
		addr, err := sc.GetMasterAddrByName(ctx, name).Result()
		return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(replica.port), fmt.Sprint(addr, err)
	})

	// The store keeps working: it reads what it wrote before, and a write
	// lands on the new master. go-redis learns of the switch from the
	// sentinel's +switch-master message, which can trail the sentinel's
	// own answer a little; the old master also still accepts writes until
	// the sentinel demotes it, so the check is that a write reaches the new
	// master within a bound, not that the first one does.
	rc := replica.client()
	defer rc.Close()
	gamma := routeSnap(t, "gamma", "g_one")
	attempts := 0
	waitFor(t, 15*time.Second, "a write through the store on the new master", func() (bool, string) {
		attempts++
		if err := w.Save(ctx, gamma); err != nil {
			return false, err.Error()
		}
		v, err := rc.HGet(ctx, "toolmesh:route:gamma", "version").Result()
		return v == gamma.Version, fmt.Sprintf("new master holds %q, %v", v, err)
	})
	t.Logf("the first write on the new master took %d attempt(s)", attempts)
	if role, _ := rc.Do(ctx, "ROLE").Slice(); len(role) == 0 || role[0] != "master" {
		t.Fatalf("the replica's role = %v", role)
	}
	// A new process after the failover: the sentinel leads it to the new
	// master, which has the snapshots written before and after.
	after := newRedisStore(t, master, RedisOptions{URL: url})
	got, errs := after.LoadMany(ctx, []string{"alpha", "beta", "gamma"})
	for i, want := range []*registry.Snapshot{alpha, beta, gamma} {
		if errs[i] != nil || got[i] == nil || got[i].Version != want.Version {
			t.Errorf("after the failover: %s = %v, %v", want.Route, got[i], errs[i])
		}
	}
	if got, err := w.Load(ctx, "alpha"); err != nil || got == nil || got.Version != alpha.Version {
		t.Errorf("Load(alpha) on the first store after the failover = %v, %v", got, err)
	}
}

// TestRedisStoreSentinelDown: sentinels that do not answer cost one
// OpTimeout per operation and are reported, like a single server.
func TestRedisStoreSentinelDown(t *testing.T) {
	port := freePort(t)
	st, err := NewRedisStore(RedisOptions{URL: fmt.Sprintf("redis+sentinel://127.0.0.1:%d?master_name=m", port), OpTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := st.Load(ctx, "alpha"); err == nil {
		t.Fatal("Load without a sentinel succeeded")
	}
	if s := st.Status(); s.Reachable || s.LastError == "" {
		t.Errorf("status = %+v", s)
	}
}
