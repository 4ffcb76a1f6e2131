//! Which parts to merge: the compaction policy, pure, apart from the code that merges them.
//!
//! Size-tiered, as in LSM stores: parts are grouped by size tier (a tier spans a factor of
//! `fanin`), and a tier holding at least `fanin` parts is packed, in the order the parts are
//! given (the order they landed), into merges whose output stays within `target_bytes`: by
//! default a merge's output is taken to be as large as its inputs, and
//! [`CompactionPolicy::plan_by`] takes an estimate instead (small parts in a light codec shrink
//! when merged into a heavier one). Parts already near the target are never merged.
//! A row is rewritten about once per tier it climbs (log_fanin(target / first part size)
//! times), not once per merge, and a partition never holds more than about `fanin - 1` small
//! parts per tier once compacted. Merges are ordered by savings: most parts removed first.

use std::collections::BTreeMap;

/// The default size compaction aims for: large enough that per-file costs vanish, small enough
/// that a merge's memory and a reader's unit of work stay modest.
pub const DEFAULT_TARGET_BYTES: u64 = 128 * 1024 * 1024;

/// The default tier width and the fewest parts of one tier that make a merge.
pub const DEFAULT_FANIN: usize = 4;

/// A part is "near the target", and left alone, from this share of it.
pub const NEAR_TARGET: f64 = 0.75;

/// One part as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSize {
    /// Its size on disk.
    pub bytes: u64,
    /// Its rows.
    pub rows: u64,
}

/// The policy's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// The size merges aim for.
    pub target_bytes: u64,
    /// Tier width, and the fewest parts of one tier that make a merge (at least 2).
    pub fanin: usize,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            target_bytes: DEFAULT_TARGET_BYTES,
            fanin: DEFAULT_FANIN,
        }
    }
}

/// One merge: which parts (indexes into the list given to [`CompactionPolicy::plan`]) become
/// one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merge {
    /// The inputs, at least two, in the order they were given (ascending indexes).
    pub inputs: Vec<usize>,
    /// Their total size.
    pub bytes: u64,
    /// The size of the merged file, as estimated when packing ([`CompactionPolicy::plan_by`];
    /// `bytes` with [`CompactionPolicy::plan`]).
    pub out_bytes: u64,
    /// Their total rows.
    pub rows: u64,
}

impl Merge {
    /// Parts removed by the merge.
    pub fn savings(&self) -> usize {
        self.inputs.len().saturating_sub(1)
    }
}

impl CompactionPolicy {
    /// The same policy, merging as soon as any tier holds two parts: for a partition whose part
    /// count is near the throttling limits, where any merge helps.
    pub fn eager(self) -> Self {
        Self { fanin: 2, ..self }
    }

    /// Whether a part is large enough to be left alone.
    pub fn is_near_target(&self, bytes: u64) -> bool {
        bytes as f64 >= self.target_bytes as f64 * NEAR_TARGET
    }

    /// The size tier of a part: how many times `fanin` divides its size.
    pub fn tier(&self, bytes: u64) -> u32 {
        let fanin = self.fanin.max(2) as u64;
        let mut tier = 0;
        let mut rest = bytes;
        while rest >= fanin {
            rest /= fanin;
            tier += 1;
        }
        tier
    }

    /// The merges worth doing among the parts of one partition, most savings first, each
    /// taken to make a file as large as its inputs.
    pub fn plan(&self, parts: &[PartSize]) -> Vec<Merge> {
        self.plan_by(parts, |i| parts[i].bytes)
    }

    /// [`Self::plan`], with `out(i)` the bytes part `i` is expected to take up in a merged file:
    /// merges are packed so that the sum of their `out` stays within the target. Tiers, and
    /// which parts are near the target, still go by the parts' own sizes.
    ///
    /// A tier's parts are packed in the order given, so that each merge takes parts that follow
    /// one another: given in the order they landed, merged files cover spans of arrival one
    /// after another, not each a sample of the whole. A part that fits with neither neighbour
    /// (between two whose expected sizes leave it no room) is packed again with the other such
    /// parts, smallest first, so a tier whose parts could pair is never left unmerged.
    pub fn plan_by(&self, parts: &[PartSize], out: impl Fn(usize) -> u64) -> Vec<Merge> {
        let fanin = self.fanin.max(2);
        let mut tiers: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, part) in parts.iter().enumerate() {
            if !self.is_near_target(part.bytes) {
                tiers.entry(self.tier(part.bytes)).or_default().push(i);
            }
        }
        let mut merges = Vec::new();
        for (_, members) in tiers {
            if members.len() < fanin {
                continue;
            }
            let (packed, mut alone): (Vec<Merge>, Vec<Merge>) = self
                .pack(parts, &out, members)
                .into_iter()
                .partition(|m| m.inputs.len() >= 2);
            merges.extend(packed);
            let mut alone: Vec<usize> = alone.iter_mut().flat_map(|m| m.inputs.drain(..)).collect();
            alone.sort_by_key(|&i| (out(i), parts[i].bytes, i));
            for mut merge in self.pack(parts, &out, alone) {
                merge.inputs.sort_unstable();
                merges.push(merge);
            }
        }
        merges.retain(|m| m.inputs.len() >= 2);
        merges.sort_by(|a, b| b.savings().cmp(&a.savings()).then(a.bytes.cmp(&b.bytes)));
        merges
    }

    /// `members` (indexes into `parts`), in their order, cut into merges whose `out` stays
    /// within the target; a part that does not fit in the current merge starts the next.
    fn pack(
        &self,
        parts: &[PartSize],
        out: &impl Fn(usize) -> u64,
        members: Vec<usize>,
    ) -> Vec<Merge> {
        let mut merges = Vec::new();
        let mut current = Merge::default();
        for i in members {
            let (part, out) = (parts[i], out(i));
            if !current.inputs.is_empty()
                && current.out_bytes.saturating_add(out) > self.target_bytes
            {
                merges.push(std::mem::take(&mut current));
            }
            current.inputs.push(i);
            current.bytes = current.bytes.saturating_add(part.bytes);
            current.out_bytes = current.out_bytes.saturating_add(out);
            current.rows = current.rows.saturating_add(part.rows);
        }
        if !current.inputs.is_empty() {
            merges.push(current);
        }
        merges
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn part(bytes: u64) -> PartSize {
        PartSize { bytes, rows: 1 }
    }

    #[test]
    fn many_small_parts_become_few_near_the_target() {
        let policy = CompactionPolicy {
            target_bytes: 1000,
            fanin: 4,
        };
        // 100 parts of 30 bytes: one tier, packed 33 to a merge.
        let parts = vec![part(30); 100];
        let merges = policy.plan(&parts);
        assert_eq!(merges.len(), 3);
        assert_eq!(merges[0].inputs.len(), 33);
        assert!(merges.iter().all(|m| m.bytes <= 1000));
        // 33 + 33 + 33: the hundredth part is left for a later merge.
        let merged: usize = merges.iter().map(|m| m.inputs.len()).sum();
        assert_eq!(merged, 99);
    }

    #[test]
    fn parts_expected_to_shrink_pack_into_fewer_merges() {
        let policy = CompactionPolicy {
            target_bytes: 1000,
            fanin: 4,
        };
        // 100 parts of 30 bytes, each expected to take 10 in a merged file: one merge of all.
        let parts = vec![part(30); 100];
        let merges = policy.plan_by(&parts, |_| 10);
        assert_eq!(merges.len(), 1);
        assert_eq!(
            (merges[0].inputs.len(), merges[0].bytes, merges[0].out_bytes),
            (100, 3000, 1000)
        );
        // Packed by the expected size: the first 90 fill a merge, and the parts that shrink
        // least (600 each, two over the target) wait.
        let merges = policy.plan_by(&parts, |i| if i < 90 { 10 } else { 600 });
        assert_eq!(merges.len(), 1);
        assert_eq!(merges[0].inputs.len(), 90);
        assert!(merges[0].inputs.iter().all(|&i| i < 90));
    }

    #[test]
    fn parts_near_the_target_and_thin_tiers_are_left_alone() {
        let policy = CompactionPolicy {
            target_bytes: 1000,
            fanin: 4,
        };
        assert!(
            policy
                .plan(&[part(800), part(900), part(760), part(999)])
                .is_empty()
        );
        // Three small parts in a tier: fewer than fanin, no merge; eager merges them.
        let parts = [part(20), part(21), part(22)];
        assert!(policy.plan(&parts).is_empty());
        assert_eq!(policy.eager().plan(&parts).len(), 1);
    }

    #[test]
    fn tiers_keep_big_parts_from_being_rewritten_for_small_ones() {
        let policy = CompactionPolicy {
            target_bytes: 1 << 30,
            fanin: 4,
        };
        let mut parts = vec![part(64 << 20)];
        parts.extend(vec![part(10_000); 4]);
        let merges = policy.plan(&parts);
        assert_eq!(merges.len(), 1);
        assert!(!merges[0].inputs.contains(&0), "{merges:?}");
    }

    #[test]
    fn merges_take_parts_that_follow_one_another() {
        let policy = CompactionPolicy {
            target_bytes: 100,
            fanin: 4,
        };
        // One tier. Smallest first would make [0, 2, 4, 1] and [3, 5], each a sample of the
        // whole; in order, the first three and the last three.
        let parts = [part(20), part(40), part(20), part(40), part(20), part(40)];
        let mut inputs: Vec<Vec<usize>> =
            policy.plan(&parts).into_iter().map(|m| m.inputs).collect();
        inputs.sort();
        assert_eq!(inputs, vec![vec![0, 1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn a_part_that_fits_with_neither_neighbour_is_paired_with_another() {
        let policy = CompactionPolicy {
            target_bytes: 1000,
            fanin: 4,
        };
        // One tier, no two neighbours within the target; the two parts of 400 are.
        let parts = [part(400), part(700), part(700), part(400)];
        let merges = policy.plan(&parts);
        assert_eq!(merges.len(), 1, "{merges:?}");
        assert_eq!(merges[0].inputs, vec![0, 3]);
    }

    proptest! {
        #[test]
        fn every_plan_is_valid(
            sized in prop::collection::vec((0u64..2_000_000, 1u64..=100), 0..300),
            target in 1_000u64..4_000_000,
            fanin in 2usize..8,
            shrinks in any::<bool>(),
        ) {
            let policy = CompactionPolicy { target_bytes: target, fanin };
            let parts: Vec<PartSize> = sized.iter().map(|&(b, _)| part(b)).collect();
            // Each part's expected share of a merged file: its size, or (`shrinks`) 1-100% of
            // it.
            let out = |i: usize| {
                let (bytes, percent) = sized[i];
                if shrinks { bytes * percent / 100 } else { bytes }
            };
            let merges = if shrinks {
                policy.plan_by(&parts, out)
            } else {
                policy.plan(&parts)
            };
            let mut seen = vec![false; parts.len()];
            for (n, merge) in merges.iter().enumerate() {
                prop_assert!(merge.inputs.len() >= 2);
                prop_assert!(
                    merge.inputs.windows(2).all(|w| w[0] < w[1]),
                    "inputs not in the order given: {:?}", merge.inputs
                );
                let tier = policy.tier(parts[merge.inputs[0]].bytes);
                let (mut bytes, mut out_bytes) = (0, 0);
                for &i in &merge.inputs {
                    prop_assert!(i < parts.len());
                    prop_assert!(!seen[i], "part {} in two merges", i);
                    seen[i] = true;
                    prop_assert!(!policy.is_near_target(parts[i].bytes));
                    prop_assert_eq!(policy.tier(parts[i].bytes), tier);
                    bytes += parts[i].bytes;
                    out_bytes += out(i);
                }
                prop_assert_eq!(merge.bytes, bytes);
                prop_assert_eq!(merge.out_bytes, out_bytes);
                prop_assert!(out_bytes <= target, "merge of {} bytes out over the target", out_bytes);
                if n > 0 {
                    prop_assert!(merges[n - 1].savings() >= merge.savings());
                }
            }
            // Progress: a tier with at least fanin parts small enough to pair gets a merge.
            let mut tiers: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for (i, p) in parts.iter().enumerate() {
                if !policy.is_near_target(p.bytes) {
                    tiers.entry(policy.tier(p.bytes)).or_default().push(out(i));
                }
            }
            for (tier, mut members) in tiers {
                members.sort_unstable();
                if members.len() >= fanin && members[0] + members[1] <= target {
                    prop_assert!(
                        merges.iter().any(|m| policy.tier(parts[m.inputs[0]].bytes) == tier),
                        "tier {} has {} parts and no merge", tier, members.len()
                    );
                }
            }
        }
    }
}
