-- cubequeue's PostgreSQL store, version 2: one function per statement family. Each call is
-- one transaction. Commands that count, claim or remove take the prefix's transaction-scoped
-- advisory lock first (cq_lock), so per prefix they run one at a time, as Cube Store runs
-- every queue statement on one thread; ids are drawn under that lock, so inside a prefix id
-- order is commit order. Time is read once per call (cq_now). Expiry is part of every
-- lookup (expire_ms > now); the leader's cq_sweep removes expired rows physically.

create or replace function cq_now() returns bigint language sql volatile as $$
  select coalesce(frozen_ms, floor(extract(epoch from clock_timestamp()) * 1000)::bigint + offset_ms)
  from cq_clock
$$;

create or replace function cq_lock(p_prefix text) returns void language sql volatile as $$
  select pg_advisory_xact_lock(hashtextextended(p_prefix, 0))
$$;

-- a prefix "exists" while it holds a live item or result (the in-memory PrefixState's life)
create or replace function cq_prefix_live(p_prefix text, p_now bigint) returns boolean
language sql stable as $$
  select exists (select 1 from cq_item i where i.prefix = p_prefix and i.expire_ms > p_now)
      or exists (select 1 from cq_result r where r.prefix = p_prefix and r.expire_ms >= p_now
                 and not r.removed_by_event)
$$;

-- one departure: the log row and the prefix's item count (the row is deleted by the caller)
create or replace function cq_depart(it cq_item, p_reason text, p_now bigint) returns void
language plpgsql as $$
begin
  insert into cq_log (id, path, reason, at_ms, queued_ms, active_ms)
  values (it.id, it.path, p_reason, p_now, coalesce(it.activated_ms, p_now) - it.created_ms,
          case when it.activated_ms is null then null else p_now - it.activated_ms end);
  update cq_prefix set items = items - 1 where prefix = it.prefix;
end $$;

-- the live item under an id or a path
create or replace function cq_find(p_id bigint, p_path text, p_now bigint) returns cq_item
language plpgsql as $$
declare it cq_item;
begin
  if p_id is not null then
    select * into it from cq_item i where i.id = p_id and i.expire_ms > p_now for update;
  else
    select * into it from cq_item i where i.path = p_path and i.expire_ms > p_now for update;
  end if;
  return it;
end $$;

-- the prefix a command by key must lock: given with a path, looked up for an id
create or replace function cq_key_prefix(p_id bigint, p_prefix text) returns text
language sql stable as $$
  select case when p_id is null then p_prefix
              else (select i.prefix from cq_item i where i.id = p_id) end
$$;

-- QUEUE ADD and ADD_AND_RETRIEVE (p_conc not null). o_full is set (and nothing changes)
-- when the queue holds p_max_items live items.
create or replace function cq_add(
  p_path text, p_prefix text, p_key text, p_payload text, p_priority bigint,
  p_orphaned_s bigint, p_pid text, p_exclusive boolean, p_ext text, p_max_items bigint,
  p_conc bigint)
returns table (o_id bigint, o_added boolean, o_pending bigint, o_active text,
               o_payload text, o_extra text, o_full bigint)
language plpgsql as $$
declare
  v_now bigint; it cq_item; v_count bigint; v_live boolean; v_orph bigint;
  v_active_count bigint; v_claim boolean;
begin
  perform cq_lock(p_prefix);
  v_now := cq_now();
  -- an expired item with this path leaves first: the unique path index would refuse the new one
  delete from cq_item i where i.path = p_path and i.expire_ms <= v_now returning * into it;
  if found then perform cq_depart(it, 'expired', v_now); end if;
  select * into it from cq_item i where i.path = p_path;
  o_added := not found;
  if o_added then
    select coalesce(sum(x.items), 0) into v_count from cq_prefix x;
    if v_count >= p_max_items then  -- the counts include expired rows not swept yet
      select count(*) into v_count from cq_item i where i.expire_ms > v_now;
      if v_count >= p_max_items then o_full := v_count; return next; return; end if;
    end if;
    v_live := cq_prefix_live(p_prefix, v_now);
    v_orph := case when p_orphaned_s is null then null else v_now + p_orphaned_s * 1000 end;
    insert into cq_item (id, prefix, key, path, priority, created_ms, orphaned_ms, expire_ms,
                         process_id, exclusive, external_id, payload)
    values (nextval('cq_id'), p_prefix, p_key, p_path, p_priority, v_now, v_orph,
            case when v_orph is null then v_now + 14400000 else v_orph + 7200000 end,
            p_pid, p_exclusive, p_ext, p_payload)
    returning * into it;
    insert into cq_prefix as x (prefix, items) values (p_prefix, 1)
    on conflict (prefix) do update set items = x.items + 1,
      last_concurrency = case when v_live then x.last_concurrency end,
      to_cancel_set = v_live and x.to_cancel_set,
      last_hb_timeout = case when v_live then x.last_hb_timeout end,
      last_orph_timeout = case when v_live then x.last_orph_timeout end;
  end if;
  o_id := it.id;
  if p_conc is null then
    select count(*) into o_pending from cq_item i
    where i.prefix = p_prefix and i.status = 0 and i.expire_ms > v_now;
    return next; return;
  end if;
  update cq_prefix x set last_concurrency = p_conc
  where x.prefix = p_prefix and x.last_concurrency is distinct from p_conc;
  select count(*) filter (where i.status = 0), count(*) filter (where i.status = 1),
         string_agg(i.key, ',' order by i.id) filter (where i.status = 1)
  into o_pending, v_active_count, o_active
  from cq_item i where i.prefix = p_prefix and i.expire_ms > v_now;
  v_claim := it.status = 0 and (not it.exclusive or it.process_id is not distinct from p_pid)
             and v_active_count + o_pending - 1 < p_conc;
  if v_claim then
    update cq_item i set status = 1, activated_ms = v_now, heartbeat_ms = v_now where i.id = it.id;
    o_pending := o_pending - 1;
    o_active := case when o_active is null then it.key else o_active || ',' || it.key end;
    o_payload := it.payload;
    o_extra := it.extra;
  end if;
  return next;
end $$;

-- QUEUE RETRIEVE: concurrency first, then the lookup, then the exclusive rules.
-- o_outcome: 'ok' (claimed), 'none', or 'needs_pid' (nothing changed).
create or replace function cq_retrieve(p_path text, p_prefix text, p_conc bigint, p_pid text)
returns table (o_outcome text, o_payload text, o_extra text, o_pending bigint,
               o_active text, o_id bigint)
language plpgsql as $$
declare v_now bigint; it cq_item; v_active_count bigint; v_claim boolean := false; v_state boolean;
begin
  perform cq_lock(p_prefix);
  v_now := cq_now();
  select count(*) filter (where i.status = 0), count(*) filter (where i.status = 1),
         string_agg(i.key, ',' order by i.id) filter (where i.status = 1)
  into o_pending, v_active_count, o_active
  from cq_item i where i.prefix = p_prefix and i.expire_ms > v_now;
  if v_active_count < p_conc then
    select * into it from cq_item i where i.path = p_path and i.expire_ms > v_now for update;
    if found and it.status = 0 then
      if not it.exclusive then
        v_claim := true;
      elsif it.process_id is not null and p_pid is null then
        o_outcome := 'needs_pid'; return next; return;
      elsif it.process_id is not distinct from p_pid then
        v_claim := true;
      end if;
    end if;
  end if;
  v_state := o_pending + v_active_count > 0 or cq_prefix_live(p_prefix, v_now);
  if v_state then
    update cq_prefix x set last_concurrency = p_conc
    where x.prefix = p_prefix and x.last_concurrency is distinct from p_conc;
  end if;
  if not v_claim then
    o_outcome := 'none'; return next; return;
  end if;
  update cq_item i set status = 1, activated_ms = v_now, heartbeat_ms = v_now where i.id = it.id;
  o_outcome := 'ok';
  o_payload := it.payload;
  o_extra := it.extra;
  o_pending := o_pending - 1;
  o_active := case when o_active is null then it.key else o_active || ',' || it.key end;
  o_id := it.id;
  return next;
end $$;

-- QUEUE ACK: the result (replacing an older one with the same path and external id), the
-- departure, the ack marker and one NOTIFY '<id> <flags> <path>' (flags: 1 = has a result,
-- 2 = the path is sent as its md5 because it is too long for a notification)
create or replace function cq_ack(p_id bigint, p_path text, p_prefix text, p_result text,
                                  p_expire_ms bigint)
returns boolean language plpgsql as $$
declare v_now bigint; v_prefix text; it cq_item; v_flags int;
begin
  v_prefix := cq_key_prefix(p_id, p_prefix);
  if v_prefix is null then return false; end if;
  perform cq_lock(v_prefix);
  v_now := cq_now();
  it := cq_find(p_id, p_path, v_now);
  if it.id is null then return false; end if;
  if p_result is not null then
    if it.external_id is not null then
      delete from cq_result r where r.path = it.path and r.external_id = it.external_id;
    end if;
    insert into cq_result (id, path, prefix, value, external_id, acked_ms, expire_ms)
    values (it.id, it.path, it.prefix, p_result, it.external_id, v_now, v_now + p_expire_ms);
  end if;
  delete from cq_item i where i.id = it.id;
  perform cq_depart(it, 'acked', v_now);
  insert into cq_ack_marker (id, path, seq, has_result)
  values (it.id, it.path, nextval('cq_marker_seq'), p_result is not null);
  v_flags := case when p_result is null then 0 else 1 end;
  if octet_length(it.path) > 7000 then
    perform pg_notify('cq_ack', it.id || ' ' || (v_flags | 2) || ' ' || md5(it.path));
  else
    perform pg_notify('cq_ack', it.id || ' ' || v_flags || ' ' || it.path);
  end if;
  return true;
end $$;

-- QUEUE CANCEL: delete in any status; the reason follows the prefix's latest TO_CANCEL
create or replace function cq_cancel(p_id bigint, p_path text, p_prefix text)
returns table (o_payload text, o_extra text) language plpgsql as $$
declare v_now bigint; v_prefix text; it cq_item; x cq_prefix; v_reason text := 'cancelled';
begin
  v_prefix := cq_key_prefix(p_id, p_prefix);
  if v_prefix is null then return; end if;
  perform cq_lock(v_prefix);
  v_now := cq_now();
  it := cq_find(p_id, p_path, v_now);
  if it.id is null then return; end if;
  select * into x from cq_prefix where prefix = it.prefix;
  if x.to_cancel_set then
    if x.last_hb_timeout is not null and it.status = 1
       and v_now - coalesce(it.heartbeat_ms, it.created_ms) > x.last_hb_timeout then
      v_reason := 'cancelled_stalled';
    elsif x.last_orph_timeout is not null and it.status = 0
       and (case when it.orphaned_ms is not null then it.orphaned_ms < v_now
                 else v_now - it.created_ms > x.last_orph_timeout end) then
      v_reason := 'cancelled_orphaned';
    end if;
  end if;
  delete from cq_item i where i.id = it.id;
  perform cq_depart(it, v_reason, v_now);
  o_payload := it.payload;
  o_extra := it.extra;
  return next;
end $$;

create or replace function cq_get(p_id bigint, p_path text)
returns table (o_payload text, o_extra text) language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if p_id is not null then
    return query select i.payload, i.extra from cq_item i where i.id = p_id and i.expire_ms > v_now;
  else
    return query select i.payload, i.extra from cq_item i where i.path = p_path and i.expire_ms > v_now;
  end if;
end $$;

-- QUEUE HEARTBEAT: a single-row update under the row lock (any status; expire unchanged)
create or replace function cq_heartbeat(p_id bigint, p_path text) returns void
language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if p_id is not null then
    update cq_item i set heartbeat_ms = v_now where i.id = p_id and i.expire_ms > v_now;
  else
    update cq_item i set heartbeat_ms = v_now where i.path = p_path and i.expire_ms > v_now;
  end if;
end $$;

-- QUEUE MERGE_EXTRA, read half: the merge itself is computed by the front end (serde_json's
-- rules), then written with cq_extra_swap, which fails if the extra changed meanwhile
create or replace function cq_extra_read(p_id bigint, p_path text)
returns table (o_id bigint, o_extra text) language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if p_id is not null then
    return query select i.id, i.extra from cq_item i where i.id = p_id and i.expire_ms > v_now;
  else
    return query select i.id, i.extra from cq_item i where i.path = p_path and i.expire_ms > v_now;
  end if;
end $$;

create or replace function cq_extra_swap(p_id bigint, p_old text, p_new text) returns boolean
language plpgsql as $$
declare v_now bigint := cq_now();
begin
  update cq_item i set extra = p_new
  where i.id = p_id and i.expire_ms > v_now and i.extra is not distinct from p_old;
  return found;
end $$;

-- QUEUE LIST / PENDING (p_status 0) / ACTIVE (1): one snapshot, exclusive filter applied
create or replace function cq_list(p_prefix text, p_status smallint, p_pid text, p_payload boolean)
returns table (o_key text, o_id bigint, o_status smallint, o_extra text, o_payload text)
language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if p_status = 1 then  -- ACTIVE: id order
    return query
    select i.key::text, i.id, i.status, i.extra, case when p_payload then i.payload end
    from cq_item i
    where i.prefix = p_prefix and i.expire_ms > v_now and i.status = 1
      and (not i.exclusive or i.process_id is null or i.process_id = p_pid)
    order by i.id;
  else  -- LIST, PENDING: priority desc, created asc, id asc
    return query
    select i.key::text, i.id, i.status, i.extra, case when p_payload then i.payload end
    from cq_item i
    where i.prefix = p_prefix and i.expire_ms > v_now
      and (p_status is null or i.status = p_status)
      and (not i.exclusive or i.process_id is null or i.process_id = p_pid)
    order by i.priority desc, i.created_ms, i.id;
  end if;
end $$;

-- QUEUE TO_CANCEL / STALLED / ORPHANED: ascending id; records the timeouts for CANCEL
create or replace function cq_to_cancel(p_prefix text, p_hb bigint, p_orph bigint)
returns table (o_key text, o_id bigint) language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if not cq_prefix_live(p_prefix, v_now) then return; end if;
  update cq_prefix x set to_cancel_set = true, last_hb_timeout = p_hb, last_orph_timeout = p_orph
  where x.prefix = p_prefix and (not x.to_cancel_set or x.last_hb_timeout is distinct from p_hb
                                 or x.last_orph_timeout is distinct from p_orph);
  return query
  select i.key::text, i.id from cq_item i
  where i.prefix = p_prefix and i.expire_ms > v_now
    and ((p_hb is not null and i.status = 1 and i.heartbeat_ms < v_now - p_hb)
      or (p_orph is not null and i.status = 0
          and ((i.orphaned_ms is null and i.created_ms < v_now - p_orph)
            or (i.orphaned_ms is not null and i.orphaned_ms < v_now))))
  order by i.id;
end $$;

-- QUEUE RESULT (and RESULT_BLOCKING's first look, p_lock): by id (read-many), by path and
-- external id, or the path's latest result consumed once. o_mismatch: an id lookup whose
-- result carries another external id (nothing changed). o_watermark: the ack-marker
-- sequence read under the prefix lock; a marker above it was committed after this look.
create or replace function cq_result(p_id bigint, p_path text, p_prefix text, p_ext text,
                                     p_lock boolean)
returns table (o_found boolean, o_value text, o_id bigint, o_ext text, o_mismatch boolean,
               o_watermark bigint, o_now bigint)
language plpgsql as $$
declare v_prefix text; r cq_result;
begin
  if p_lock then
    v_prefix := coalesce(cq_key_prefix(p_id, p_prefix),
                         (select x.prefix from cq_result x where x.id = p_id));
    if v_prefix is not null then perform cq_lock(v_prefix); end if;
  end if;
  o_now := cq_now();
  select case when s.is_called then s.last_value else 0 end into o_watermark from cq_marker_seq s;
  o_found := false;
  o_mismatch := false;
  if p_id is not null then
    select * into r from cq_result x where x.id = p_id and x.expire_ms >= o_now
      and not x.removed_by_event;
    if found and p_ext is not null and r.external_id is distinct from p_ext then
      o_mismatch := true; o_ext := r.external_id; return next; return;
    end if;
  else
    if p_ext is not null then
      select * into r from cq_result x where x.path = p_path and x.external_id = p_ext
        and x.expire_ms >= o_now and not x.removed_by_event;
    end if;
    if r.id is null then
      update cq_result x set deleted = true
      where x.id = (select y.id from cq_result y where y.path = p_path and y.expire_ms >= o_now
                    and not y.removed_by_event order by y.id desc limit 1)
        and not x.deleted
      returning * into r;
    end if;
  end if;
  if r.id is not null then
    o_found := true; o_value := r.value; o_id := r.id; o_ext := r.external_id;
  end if;
  return next;
end $$;

-- a waiter's delivery through the ACK's event: the row whatever its flags; path waiters
-- remove it (later lookups see nothing), id waiters flag it deleted
create or replace function cq_result_event(p_id bigint, p_path_waiters boolean, p_id_waiters boolean)
returns text language plpgsql as $$
declare v_value text;
begin
  update cq_result x set removed_by_event = x.removed_by_event or p_path_waiters,
                         deleted = x.deleted or (p_id_waiters and not p_path_waiters)
  where x.id = p_id returning x.value into v_value;
  return v_value;
end $$;

-- QUEUE TRUNCATE: every item (logged) and result; ids continue
create or replace function cq_truncate() returns void language plpgsql as $$
declare v_now bigint;
begin
  lock table cq_item, cq_result in access exclusive mode;
  v_now := cq_now();
  insert into cq_log (id, path, reason, at_ms, queued_ms, active_ms)
  select i.id, i.path, 'truncated', v_now, coalesce(i.activated_ms, v_now) - i.created_ms,
         case when i.activated_ms is null then null else v_now - i.activated_ms end
  from cq_item i where i.expire_ms > v_now order by i.id;
  delete from cq_item;
  delete from cq_result;
  update cq_prefix set items = 0, last_concurrency = null, to_cancel_set = false,
                       last_hb_timeout = null, last_orph_timeout = null;
end $$;

-- QUEUE PURGE [PENDING | ACTIVE]: the prefix's live items, logged in id order
create or replace function cq_purge(p_prefix text, p_status smallint) returns bigint
language plpgsql as $$
declare v_now bigint; v_count bigint;
begin
  perform cq_lock(p_prefix);
  v_now := cq_now();
  with gone as (
    delete from cq_item i where i.prefix = p_prefix and i.expire_ms > v_now
      and (p_status is null or i.status = p_status)
    returning *
  ), logged as (
    insert into cq_log (id, path, reason, at_ms, queued_ms, active_ms)
    select g.id, g.path, 'purged', v_now, coalesce(g.activated_ms, v_now) - g.created_ms,
           case when g.activated_ms is null then null else v_now - g.activated_ms end
    from gone g order by g.id
    returning 1
  )
  select count(*) into v_count from logged;
  update cq_prefix x set items = x.items - v_count where x.prefix = p_prefix and v_count > 0;
  return v_count;
end $$;

-- CACHE SET [NX] [TTL s]: replace keeps the row id; a TTL that is already over removes
create or replace function cq_cache_set(p_path text, p_prefix text, p_key text, p_value text,
                                        p_ttl bigint, p_nx boolean, p_size bigint)
returns boolean language plpgsql as $$
declare v_now bigint := cq_now(); v_expire bigint;
begin
  delete from cq_cache c where c.path = p_path and c.expire_ms <= v_now;
  v_expire := case when p_ttl is null then null else v_now + p_ttl * 1000 end;
  if v_expire is not null and v_expire <= v_now then
    if p_nx and exists (select 1 from cq_cache c where c.path = p_path) then return false; end if;
    delete from cq_cache c where c.path = p_path;
    return true;
  end if;
  if p_nx then
    insert into cq_cache (path, id, idx_prefix, key, value, expire_ms, size_bytes, last_use)
    values (p_path, nextval('cq_cache_id'), p_prefix, p_key, p_value, v_expire, p_size,
            nextval('cq_cache_use'))
    on conflict (path) do nothing;
    return found;
  end if;
  insert into cq_cache as c (path, id, idx_prefix, key, value, expire_ms, size_bytes, last_use)
  values (p_path, nextval('cq_cache_id'), p_prefix, p_key, p_value, v_expire, p_size,
          nextval('cq_cache_use'))
  on conflict (path) do update set value = excluded.value, expire_ms = excluded.expire_ms,
    size_bytes = excluded.size_bytes, last_use = excluded.last_use;
  return true;
end $$;

-- CACHE GET: a hit is a use (LRU)
create or replace function cq_cache_get(p_path text) returns text language plpgsql as $$
declare v_now bigint := cq_now(); v_value text;
begin
  update cq_cache c set last_use = nextval('cq_cache_use')
  where c.path = p_path and (c.expire_ms is null or c.expire_ms > v_now)
  returning c.value into v_value;
  return v_value;
end $$;

create or replace function cq_cache_keys(p_prefix text) returns table (o_path text)
language plpgsql as $$
declare v_now bigint := cq_now();
begin
  return query select c.path::text from cq_cache c
  where c.idx_prefix = p_prefix and (c.expire_ms is null or c.expire_ms > v_now) order by c.id;
end $$;

-- CACHE INCR: missing → '1' without TTL; an i64 → +1 keeping TTL and row id; anything
-- else returns the old value unchanged (o_ok false) for the front end's exact error text
create or replace function cq_cache_incr(p_path text, p_prefix text, p_key text, p_size bigint)
returns table (o_ok boolean, o_value text) language plpgsql as $$
declare v_now bigint := cq_now(); c cq_cache; v_new text;
begin
  delete from cq_cache x where x.path = p_path and x.expire_ms <= v_now;
  loop
    select * into c from cq_cache x where x.path = p_path for update;
    if not found then
      insert into cq_cache (path, id, idx_prefix, key, value, expire_ms, size_bytes, last_use)
      values (p_path, nextval('cq_cache_id'), p_prefix, p_key, '1', null, p_size, nextval('cq_cache_use'))
      on conflict (path) do nothing;
      if found then o_ok := true; o_value := '1'; return next; return; end if;
      continue;  -- a concurrent INCR inserted it: increment that row
    end if;
    if c.value ~ '^[+-]?[0-9]+$' and c.value::numeric >= -9223372036854775808
       and c.value::numeric < 9223372036854775807 then
      v_new := (c.value::numeric + 1)::text;
      update cq_cache x set value = v_new,
        size_bytes = x.size_bytes - octet_length(c.value) + octet_length(v_new),
        last_use = nextval('cq_cache_use')
      where x.path = p_path;
      o_ok := true; o_value := v_new; return next; return;
    end if;
    o_ok := false; o_value := c.value; return next; return;
  end loop;
end $$;

-- CACHE PURGE: every key KEYS would list; returns how many were live
create or replace function cq_cache_purge(p_prefix text) returns bigint language plpgsql as $$
declare v_now bigint := cq_now(); v_count bigint;
begin
  with gone as (delete from cq_cache c where c.idx_prefix = p_prefix returning c.expire_ms)
  select count(*) filter (where g.expire_ms is null or g.expire_ms > v_now) into v_count from gone g;
  return v_count;
end $$;

-- LRU eviction until both limits hold, sparing the most recently used row; one evictor at a time
create or replace function cq_cache_evict(p_max_keys bigint, p_max_bytes bigint) returns bigint
language plpgsql as $$
declare v_now bigint := cq_now(); v_keys bigint; v_bytes bigint; v_evicted bigint := 0;
        v_freed bigint := 0; r record;
begin
  perform pg_advisory_xact_lock(hashtextextended('cubequeue:cache-eviction', 0));
  delete from cq_cache c where c.expire_ms <= v_now;
  select count(*), coalesce(sum(c.size_bytes), 0) into v_keys, v_bytes from cq_cache c;
  if v_keys <= p_max_keys and v_bytes <= p_max_bytes then return 0; end if;
  for r in select c.path, c.size_bytes from cq_cache c order by c.last_use loop
    exit when (v_keys <= p_max_keys and v_bytes <= p_max_bytes) or v_keys <= 1;
    delete from cq_cache c where c.path = r.path;
    v_keys := v_keys - 1; v_bytes := v_bytes - r.size_bytes;
    v_evicted := v_evicted + 1; v_freed := v_freed + r.size_bytes;
  end loop;
  update cq_stats set evicted_keys = evicted_keys + v_evicted, evicted_bytes = evicted_bytes + v_freed;
  return v_evicted;
end $$;

-- SYS CLOCK: the test clock every front end reads (cq_now); a change is announced on
-- 'cq_clock' so that front ends refresh their copy for UNIX_TIMESTAMP()
create or replace function cq_clock(p_action text, p_ms bigint)
returns table (o_now bigint, o_offset bigint, o_frozen boolean) language plpgsql as $$
declare v_real bigint := floor(extract(epoch from clock_timestamp()) * 1000)::bigint;
begin
  if p_action = 'advance' then
    update cq_clock set offset_ms = offset_ms + p_ms, frozen_ms = frozen_ms + p_ms;
  elsif p_action = 'freeze' then
    update cq_clock set frozen_ms = v_real + offset_ms where frozen_ms is null;
  elsif p_action = 'resume' then
    update cq_clock set offset_ms = frozen_ms - v_real, frozen_ms = null where frozen_ms is not null;
  end if;
  if p_action <> 'show' then perform pg_notify('cq_clock', p_action); end if;
  return query select coalesce(k.frozen_ms, v_real + k.offset_ms), k.offset_ms, k.frozen_ms is not null
  from cq_clock k;
end $$;

-- housekeeping (the elected leader): expired items (logged 'expired', under their prefix's
-- lock, skipping prefixes busy right now), expired results, old markers, the log's tail
-- and empty prefix rows. Returns the rows removed; call again while it returns p_limit.
create or replace function cq_sweep(p_limit int, p_log_size bigint, p_marker_age interval)
returns bigint language plpgsql as $$
declare v_now bigint := cq_now(); v_removed bigint := 0; v_n bigint; p text; it cq_item;
begin
  for p in select distinct i.prefix from cq_item i where i.expire_ms <= v_now limit p_limit loop
    continue when not pg_try_advisory_xact_lock(hashtextextended(p, 0));
    for it in delete from cq_item i where i.prefix = p and i.expire_ms <= v_now returning * loop
      perform cq_depart(it, 'expired', v_now);
      v_removed := v_removed + 1;
    end loop;
    exit when v_removed >= p_limit;
  end loop;
  delete from cq_result r where r.id in (select x.id from cq_result x where x.expire_ms < v_now limit p_limit);
  get diagnostics v_n = row_count; v_removed := v_removed + v_n;
  delete from cq_ack_marker m where m.created_at < clock_timestamp() - p_marker_age;
  delete from cq_log l where l.seq <= (select max(x.seq) from cq_log x) - p_log_size;
  delete from cq_cache c where c.path in (select x.path from cq_cache x where x.expire_ms <= v_now limit p_limit);
  get diagnostics v_n = row_count; v_removed := v_removed + v_n;
  for p in select x.prefix from cq_prefix x where x.items <= 0 limit p_limit loop
    continue when not pg_try_advisory_xact_lock(hashtextextended(p, 0));
    delete from cq_prefix x where x.prefix = p and x.items <= 0 and not cq_prefix_live(p, v_now);
  end loop;
  return v_removed;
end $$;
