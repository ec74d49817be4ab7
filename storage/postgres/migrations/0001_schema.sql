-- cubequeue's PostgreSQL store, schema version 1: the tables behind every QUEUE, CACHE and
-- SYS statement. Every statement is one call of a cq_* function (0002_functions.sql); the
-- front ends hold no queue state. Times are integer milliseconds since the Unix epoch
-- from cq_now() (the database clock plus the test clock's offset). Text that is compared
-- or ordered (paths, prefixes, keys) uses the "C" collation: byte order, which for UTF-8
-- is code-point order, the order the in-memory store sorts in.

create sequence if not exists cq_id;           -- queue ids: one sequence for every prefix
create sequence if not exists cq_marker_seq;   -- ack markers, in commit order per prefix
create sequence if not exists cq_cache_id;     -- cache row ids (CACHE KEYS order)
create sequence if not exists cq_cache_use;    -- cache LRU order (a use draws the next value)

-- queue items: Cube Store's QueueItems row plus its payload
create table if not exists cq_item (
  id           bigint primary key,
  prefix       text collate "C" not null,      -- before the last ':' of path, or ''
  key          text collate "C" not null,      -- after the last ':'
  path         text collate "C" not null,
  status       smallint not null default 0,    -- 0 pending, 1 active
  priority     bigint not null,
  created_ms   bigint not null,
  heartbeat_ms bigint,
  activated_ms bigint,
  orphaned_ms  bigint,
  expire_ms    bigint not null,
  process_id   text,
  exclusive    boolean not null default false,
  external_id  text,
  extra        text,
  payload      text not null
);
create unique index if not exists cq_item_path on cq_item (path);
create index if not exists cq_item_rank on cq_item (prefix, status, priority desc, created_ms, id);
create index if not exists cq_item_expire on cq_item (expire_ms);
-- queue tables change all the time: statistics from the first minute (an unanalysed
-- queue table made the claim 30x slower in the design's measurements)
alter table cq_item set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.01,
                         autovacuum_analyze_threshold = 50);

-- results of ACKed items; id = the item's id
create table if not exists cq_result (
  id               bigint primary key,
  path             text collate "C" not null,
  prefix           text collate "C" not null,
  value            text not null,
  external_id      text,
  acked_ms         bigint not null,
  expire_ms        bigint not null,
  deleted          boolean not null default false,  -- consumed by path (or by an id waiter)
  removed_by_event boolean not null default false   -- delivered to a path waiter: gone
);
create index if not exists cq_result_path on cq_result (path, id desc);
create unique index if not exists cq_result_path_ext on cq_result (path, external_id)
  where external_id is not null;
create index if not exists cq_result_expire on cq_result (expire_ms);
create index if not exists cq_result_prefix on cq_result (prefix);
alter table cq_result set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.01);

-- one row per ACK: what a RESULT_BLOCKING waiter that missed the NOTIFY re-checks
create table if not exists cq_ack_marker (
  id         bigint primary key,
  path       text collate "C" not null,
  seq        bigint not null,
  has_result boolean not null,
  created_at timestamptz not null default clock_timestamp()   -- real time, for GC
);
create index if not exists cq_ack_marker_seq on cq_ack_marker (seq);

-- the departure log (system.queue_log); trimmed to --queue-log-size by the leader
create table if not exists cq_log (
  seq       bigserial primary key,
  id        bigint not null,
  path      text not null,
  reason    text not null,
  at_ms     bigint not null,
  queued_ms bigint not null,
  active_ms bigint
);

-- per prefix: the item count (for --max-items without a table scan) and what the latest
-- RETRIEVE and TO_CANCEL said (system.queue_prefixes, CANCEL's departure reason); the
-- latter are forgotten when the prefix holds nothing, as the in-memory store forgets it
create table if not exists cq_prefix (
  prefix           text collate "C" primary key,
  items            bigint not null default 0,
  last_concurrency bigint,
  to_cancel_set    boolean not null default false,
  last_hb_timeout  bigint,
  last_orph_timeout bigint
);

-- the cache
create table if not exists cq_cache (
  path       text collate "C" primary key,
  id         bigint not null,
  idx_prefix text collate "C" not null,   -- before the last ':', or '' without one
  key        text not null,
  value      text not null,
  expire_ms  bigint,
  size_bytes bigint not null,             -- UTF-8 bytes of path + value
  last_use   bigint not null              -- LRU order; not indexed, so uses stay HOT updates
);
create index if not exists cq_cache_prefix on cq_cache (idx_prefix, id);
create index if not exists cq_cache_expire on cq_cache (expire_ms) where expire_ms is not null;

-- the test clock (SYS CLOCK under --test-clock): shared by every front end
create table if not exists cq_clock (
  one       boolean primary key default true check (one),
  offset_ms bigint not null default 0,
  frozen_ms bigint
);
insert into cq_clock (one) values (true) on conflict do nothing;

-- store-wide counters
create table if not exists cq_stats (
  one           boolean primary key default true check (one),
  evicted_keys  bigint not null default 0,
  evicted_bytes bigint not null default 0
);
insert into cq_stats (one) values (true) on conflict do nothing;
