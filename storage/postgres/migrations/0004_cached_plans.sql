-- cubequeue's PostgreSQL store, version 4: the small helpers every step calls (cq_now,
-- cq_lock, cq_key_prefix, cq_prefix_live) become PL/pgSQL. As SQL functions they were not
-- inlined where PL/pgSQL calls them, so each call planned its query afresh: cq_now alone
-- ran ~12 times per Cube cycle and cost more database CPU than the queue's own work.
-- A PL/pgSQL function keeps its plans for the session. Same signatures, same results.

create or replace function cq_now() returns bigint language plpgsql volatile as $$
begin
  return (select coalesce(k.frozen_ms,
                          floor(extract(epoch from clock_timestamp()) * 1000)::bigint + k.offset_ms)
          from cq_clock k);
end $$;

create or replace function cq_lock(p_prefix text) returns void language plpgsql volatile as $$
begin
  perform pg_advisory_xact_lock(hashtextextended(p_prefix, 0));
end $$;

create or replace function cq_key_prefix(p_id bigint, p_prefix text) returns text
language plpgsql stable as $$
begin
  if p_id is null then return p_prefix; end if;
  return (select i.prefix from cq_item i where i.id = p_id);
end $$;

create or replace function cq_prefix_live(p_prefix text, p_now bigint) returns boolean
language plpgsql stable as $$
begin
  return exists (select 1 from cq_item i where i.prefix = p_prefix and i.expire_ms > p_now)
      or exists (select 1 from cq_result r where r.prefix = p_prefix and r.expire_ms >= p_now
                 and not r.removed_by_event);
end $$;
