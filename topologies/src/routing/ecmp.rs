//! The ECMP hash: which of a vertex's equal-cost next hops a flow takes
//! (see the parent module's "ECMP"), from a fixed mix that depends on
//! nothing but the seed, the flow and the vertex.

/// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a fixed, well-mixed
/// 64-bit hash of `z`.
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The ECMP hash of a flow at a vertex: `splitmix64` chained over the
/// seed, the flow and the vertex index.
pub fn ecmp_hash(seed: u64, flow: u64, vertex: u64) -> u64 {
    splitmix64(splitmix64(splitmix64(seed) ^ flow) ^ vertex)
}
