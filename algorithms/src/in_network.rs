//! In-network reduction: what every back-end of
//! [`Fabric::reduce_in_network`](crate::Fabric::reduce_in_network) shares.
//!
//! A switch that reduces (an NVSwitch with NVLink SHARP, an InfiniBand
//! switch with SHARP) takes one contribution from each member of a group,
//! combines them and sends the result back to every member. The order of
//! the combination is fixed here, member order as a left fold, so the
//! simulator and the model checker compute the same bits and the same
//! symbolic trees.

use crate::dtype::ReduceOp;
use crate::fabric::{FabricError, Rank};
use crate::payload::Payload;

/// Why a fabric without a reducing switch refuses
/// [`Fabric::reduce_in_network`](crate::Fabric::reduce_in_network).
pub const NO_SWITCH_REASON: &str = "NVLS/CollNet needs a switch that reduces in the network \
     (NVSwitch with NVLink SHARP, or SHARP InfiniBand switches); this fabric has none";

/// Why a fabric without a multicasting switch refuses
/// [`Fabric::multicast_in_network`](crate::Fabric::multicast_in_network).
pub const NO_MULTICAST_REASON: &str = "NVLS-Tree needs a switch that multicasts in the network \
     (NVSwitch with NVLink SHARP: multimem.st); this fabric has none";

/// `((c0 ⊕ c1) ⊕ c2) ⊕ ...`: the contributions combined in member order,
/// the earlier result the left operand (the order
/// [`Order::left_fold`](crate::reference::Order::left_fold) over the
/// members). `None` if there are none or their shapes differ.
pub fn reduce_in_member_order<'a>(
    mut contributions: impl Iterator<Item = &'a Payload>,
    op: ReduceOp,
) -> Option<Payload> {
    let mut acc = contributions.next()?.clone();
    for c in contributions {
        acc.reduce_from_right(0..acc.len(), c, op).ok()?;
    }
    Some(acc)
}

/// Checks a group named by `rank` among `world_size` ranks: members in
/// range and distinct (not necessarily `rank` among them: see
/// [`Fabric::can_reduce_in_network`](crate::Fabric::can_reduce_in_network)).
pub fn check_members(rank: Rank, group: &[Rank], world_size: usize) -> Result<(), FabricError> {
    if let Some(&peer) = group.iter().find(|&&r| r >= world_size) {
        return Err(FabricError::PeerOutOfRange {
            rank,
            peer,
            world_size,
        });
    }
    match (1..group.len()).find(|&i| group[..i].contains(&group[i])) {
        Some(i) => Err(FabricError::NoInNetworkReduction {
            rank,
            reason: format!(
                "rank {} appears twice in the in-network reduction's group {group:?}",
                group[i]
            ),
        }),
        None => Ok(()),
    }
}

/// Checks a group handed to
/// [`Fabric::reduce_in_network`](crate::Fabric::reduce_in_network) by
/// `rank` among `world_size` ranks: [`check_members`], and `rank` among
/// them; returns `rank`'s index in the group.
pub fn check_group(rank: Rank, group: &[Rank], world_size: usize) -> Result<usize, FabricError> {
    check_members(rank, group, world_size)?;
    group
        .iter()
        .position(|&r| r == rank)
        .ok_or_else(|| FabricError::NoInNetworkReduction {
            rank,
            reason: format!("rank {rank} is not in its in-network reduction's group {group:?}"),
        })
}

/// Checks the root `rank` named for
/// [`Fabric::reduce_to_in_network`](crate::Fabric::reduce_to_in_network):
/// a member of `group`.
pub fn check_root(rank: Rank, group: &[Rank], root: Rank) -> Result<(), FabricError> {
    if group.contains(&root) {
        return Ok(());
    }
    Err(FabricError::NoInNetworkReduction {
        rank,
        reason: format!("the in-network reduction's root {root} is not in its group {group:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contributions_combine_left_to_right_in_member_order() {
        let c = [
            Payload::from_vec(vec![1.0e8f32, 1.0]),
            Payload::from_vec(vec![-1.0e8f32, 2.0]),
            Payload::from_vec(vec![1.0f32, 3.0]),
        ];
        let got = reduce_in_member_order(c.iter(), ReduceOp::Sum).expect("same shapes");
        // (1e8 + -1e8) + 1 = 1 in f32, whereas 1e8 + (-1e8 + 1) = 0.
        assert_eq!(got.as_slice::<f32>(), Some(&[1.0f32, 6.0][..]));
        assert!(reduce_in_member_order([].iter(), ReduceOp::Sum).is_none());
        let odd = [
            Payload::from_vec(vec![1.0f32]),
            Payload::from_vec(vec![1.0f32, 2.0]),
        ];
        assert!(reduce_in_member_order(odd.iter(), ReduceOp::Sum).is_none());
    }

    #[test]
    fn groups_are_checked() {
        assert_eq!(check_group(2, &[0, 2, 3], 4), Ok(1));
        assert_eq!(check_members(1, &[0, 2, 3], 4), Ok(()));
        assert!(matches!(
            check_group(1, &[0, 2], 4),
            Err(FabricError::NoInNetworkReduction { .. })
        ));
        assert!(matches!(
            check_group(0, &[0, 0], 4),
            Err(FabricError::NoInNetworkReduction { .. })
        ));
        assert!(matches!(
            check_group(0, &[0, 4], 4),
            Err(FabricError::PeerOutOfRange { peer: 4, .. })
        ));
    }
}
