-- Shared by the regional scripts. A region's hash (KEYS[1], the same key in
-- every region) holds:
--   a        the tag: regional_fixed_window or regional_sliding_window;
--   s, c, p  this region's window start (a multiple of the window), its
--            count in that window and in the window before;
--   t        the latest window whose tiers were tightened;
--   x        the latest window announced exhausted;
--   y        the latest exhausted window a check here has noticed;
--   h, r     the window of a sync this region asked for at a tier and that
--            has not completed, and this region's count when it asked;
--   {name}:s, {name}:c, {name}:p   what this region knows of region {name}:
--            its s, c and p as last read (or as another region passed on).

-- The counts of a region that stored (rs, rc, rp), for the window starting
-- at `start` and the one before. A region that has not counted in `start`
-- yet counted its rc before it; one whose clock is ahead counted its rp in
-- `start`. The same mapping as Stored::counts_at.
local function counts_for(rs, rc, rp, start, w)
  if rs == start then
    return rc, rp
  elseif rs == start - w then
    return 0, rc
  elseif rs == start + w then
    return rp, 0
  end
  return 0, 0
end

-- Lengthens a key's TTL to cover `us` µs from now, never shortens it.
local function extend(key, us)
  local want = ttl_ms(us)
  if redis.call('PTTL', key) < want then
    redis.call('PEXPIRE', key, want)
  end
end

local function field_names(list, first_arg, stride)
  for i = first_arg, #ARGV, stride do
    local name = ARGV[i]
    list[#list + 1] = name .. ':s'
    list[#list + 1] = name .. ':c'
    list[#list + 1] = name .. ':p'
  end
  return list
end
