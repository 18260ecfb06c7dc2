package supervisor

import cmap "github.com/orcaman/concurrent-map"

// protoactor's process registry (one per actor system) is 1024 buckets of
// concurrent maps, each of cmap.SHARD_COUNT shards: 32 by default, which
// is 32,768 Go maps and about 4 MB of heap held for the daemon's life, for
// a registry that holds a handful of actors per task. The 1024 buckets
// already spread the locks, so one shard each is enough. cmap reads the
// count when a map is made and when a key is looked up, so it is set once
// here, before any actor system exists (package initialisation), and
// never again. TestRegistryShards holds it.
func init() { cmap.SHARD_COUNT = 1 }
