-- cubequeue's PostgreSQL store, version 5: QUEUE MERGE_EXTRA in one call when the item has
-- no extra yet. The first write is stored verbatim (docs/dialect.md §3.8), so the front
-- end, having validated the argument, passes it along with the read: an item without extra
-- takes it in the same call, one round trip instead of cq_extra_read plus cq_extra_swap.
-- An item with extra answers its id and extra as cq_extra_read did, for the front end's
-- merge and cq_extra_swap.

create or replace function cq_extra_merge(p_id bigint, p_path text, p_first text)
returns table (o_id bigint, o_extra text, o_stored boolean) language plpgsql as $$
declare v_now bigint := cq_now();
begin
  if p_id is not null then
    select i.id, i.extra into o_id, o_extra from cq_item i where i.id = p_id and i.expire_ms > v_now;
  else
    select i.id, i.extra into o_id, o_extra from cq_item i where i.path = p_path and i.expire_ms > v_now;
  end if;
  if not found then return; end if;
  o_stored := false;
  if o_extra is null and p_first is not null then
    -- an extra written meanwhile fails the re-check: the front end reads again
    update cq_item i set extra = p_first where i.id = o_id and i.expire_ms > v_now and i.extra is null;
    o_stored := found;
  end if;
  return next;
end $$;
