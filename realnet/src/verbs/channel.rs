//! [`Channel`]: the protocol of one connection, without verbs.
//!
//! A channel turns queued messages into frames written into send slots,
//! and received frames back into messages; it keeps the credits and knows
//! which slots are busy. The fabric only moves bytes between slots and the
//! device (post a send, post a receive, poll completions), so everything
//! here is tested in memory by connecting two channels back to back.

use std::collections::VecDeque;

use algorithms::{Payload, Tag};

use crate::call::CallId;
use crate::verbs::frame::{self, FrameKind, HEADER_BYTES, MessageHead};
use crate::verbs::slots::{CONTROL_SLOTS, Credits, SendSlot, SlotLayout};

/// A message waiting to be framed.
struct Outgoing {
    head: MessageHead,
    payload: Payload,
}

/// A message whose frames are arriving.
struct Assembly {
    head: MessageHead,
    payload: Payload,
    filled: usize,
}

/// What a received frame amounted to.
#[derive(Debug, PartialEq)]
pub enum Arrival {
    /// Credits only, or a frame of a message that is not complete yet.
    Partial,
    /// A whole message.
    Message {
        /// Its tag.
        tag: Tag,
        /// The sender's call.
        call: CallId,
        /// Its elements (a phantom for a phantom).
        payload: Payload,
    },
    /// The peer sent everything it will send.
    Bye,
}

/// One connection's protocol state.
pub struct Channel {
    layout: SlotLayout,
    message_bytes_max: u64,
    credits: Credits,
    out: VecDeque<Outgoing>,
    /// Bytes of the front message already framed (`None`: first frame not sent).
    framed: Option<usize>,
    free_data: Vec<u32>,
    free_control: Vec<u32>,
    bye_slot: Option<u32>,
    assembling: Option<Assembly>,
    bye_wanted: bool,
    bye_sent: bool,
    bye_done: bool,
    bye_received: bool,
}

impl Channel {
    /// A fresh connection laid out as `layout`, refusing incoming messages
    /// over `message_bytes_max`.
    pub fn new(layout: SlotLayout, message_bytes_max: u64) -> Channel {
        Channel {
            layout,
            message_bytes_max,
            credits: Credits::new(layout.slots),
            out: VecDeque::new(),
            framed: None,
            free_data: (0..layout.slots).rev().collect(),
            free_control: (0..CONTROL_SLOTS).rev().collect(),
            bye_slot: None,
            assembling: None,
            bye_wanted: false,
            bye_sent: false,
            bye_done: false,
            bye_received: false,
        }
    }

    /// Queues a message; frames go out as [`Channel::poll_send`] finds slots and credits.
    pub fn queue(&mut self, tag: Tag, call: CallId, payload: Payload) {
        let head = MessageHead {
            tag,
            call,
            shape: payload.shape(),
            phantom: payload.is_phantom(),
        };
        self.out.push_back(Outgoing { head, payload });
    }

    /// Asks for a Bye once every queued message is framed.
    pub fn want_bye(&mut self) {
        self.bye_wanted = true;
    }

    /// Whether the Bye went out and completed, and the peer's Bye arrived.
    pub fn finished(&self) -> bool {
        self.bye_done && self.bye_received
    }

    /// Whether the peer said Bye.
    pub fn bye_received(&self) -> bool {
        self.bye_received
    }

    /// Messages queued or partly framed.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// The credits of this connection (for tests and reports).
    pub fn credits(&self) -> Credits {
        self.credits
    }

    /// Writes the next frame worth sending into its slot of `area` (this
    /// connection's send area) and returns the slot and the frame's length,
    /// or `None` when nothing can go now. Data comes first (it carries the
    /// owed credits), then a credit frame if one is due, then the Bye.
    pub fn poll_send(&mut self, area: &mut [u8]) -> Option<(SendSlot, usize)> {
        if let Some(sent) = self.poll_data(area) {
            return Some(sent);
        }
        if self.credits.credit_frame_due() && !self.bye_received {
            return self.control(area, FrameKind::Credit);
        }
        if self.bye_wanted && !self.bye_sent && self.out.is_empty() {
            return self.control(area, FrameKind::Bye);
        }
        None
    }

    fn poll_data(&mut self, area: &mut [u8]) -> Option<(SendSlot, usize)> {
        let front = self.out.front()?;
        if self.free_data.is_empty() || self.credits.available() == 0 {
            return None;
        }
        let total = front.head.bytes() as usize;
        let done = self.framed.unwrap_or(0);
        let len = (total - done).min(self.layout.payload_bytes());
        let slot = self.free_data.pop().expect("checked non-empty");
        assert!(self.credits.take(), "checked available");
        let (off, _) = self.layout.send_slot(SendSlot::Data(slot));
        let buf = &mut area[off..off + HEADER_BYTES + len];
        let head = if self.framed.is_none() {
            Some(&front.head)
        } else {
            None
        };
        frame::encode_header(
            buf,
            FrameKind::Data,
            self.credits.hand_back(),
            len as u32,
            head,
        );
        if let Some(bytes) = front.payload.as_bytes() {
            buf[HEADER_BYTES..].copy_from_slice(&bytes[done..done + len]);
        }
        if done + len == total {
            self.out.pop_front();
            self.framed = None;
        } else {
            self.framed = Some(done + len);
        }
        Some((SendSlot::Data(slot), HEADER_BYTES + len))
    }

    fn control(&mut self, area: &mut [u8], kind: FrameKind) -> Option<(SendSlot, usize)> {
        let slot = self.free_control.pop()?;
        let (off, _) = self.layout.send_slot(SendSlot::Control(slot));
        let credits = self.credits.hand_back();
        frame::encode_header(&mut area[off..off + HEADER_BYTES], kind, credits, 0, None);
        if kind == FrameKind::Bye {
            self.bye_sent = true;
            self.bye_slot = Some(slot);
        }
        Some((SendSlot::Control(slot), HEADER_BYTES))
    }

    /// Frees a send slot whose send completed (successfully or not).
    pub fn send_completed(&mut self, slot: SendSlot) {
        match slot {
            SendSlot::Data(s) => {
                debug_assert!(!self.free_data.contains(&s));
                self.free_data.push(s);
            }
            SendSlot::Control(c) => {
                if self.bye_slot == Some(c) {
                    self.bye_slot = None;
                    self.bye_done = true;
                }
                debug_assert!(!self.free_control.contains(&c));
                self.free_control.push(c);
            }
        }
    }

    /// Whether no send of this connection is in flight.
    pub fn sends_idle(&self) -> bool {
        self.free_data.len() == self.layout.slots as usize
            && self.free_control.len() == CONTROL_SLOTS as usize
    }

    /// Takes in a frame received from the peer (its receive slot may be
    /// re-posted as soon as this returns). An error is a protocol violation
    /// that ends the connection.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<Arrival, String> {
        let (header, body) = frame::decode(bytes).map_err(|e| format!("malformed frame: {e}"))?;
        self.credits
            .on_frame(header.credits, header.kind == FrameKind::Data)?;
        match header.kind {
            FrameKind::Credit => Ok(Arrival::Partial),
            FrameKind::Bye => {
                if self.assembling.is_some() {
                    return Err("Bye in the middle of a message".into());
                }
                self.bye_received = true;
                Ok(Arrival::Bye)
            }
            FrameKind::Data => self.receive_data(header.head, body),
        }
    }

    fn receive_data(&mut self, head: Option<MessageHead>, body: &[u8]) -> Result<Arrival, String> {
        if let Some(head) = head {
            if let Some(a) = &self.assembling {
                return Err(format!(
                    "a new message (tag {}) began before message tag {} was complete",
                    head.tag, a.head.tag
                ));
            }
            if head.bytes() > self.message_bytes_max {
                return Err(format!(
                    "message of {} bytes is over the {}-byte limit",
                    head.bytes(),
                    self.message_bytes_max
                ));
            }
            let payload = Payload::zeros(head.shape.dtype, head.shape.count, head.phantom);
            self.assembling = Some(Assembly {
                head,
                payload,
                filled: 0,
            });
        }
        let Some(a) = self.assembling.as_mut() else {
            return Err("a continuation frame without a message".into());
        };
        let total = a.head.bytes() as usize;
        if a.filled + body.len() > total {
            return Err(format!(
                "message tag {} of {total} bytes got {} bytes",
                a.head.tag,
                a.filled + body.len()
            ));
        }
        if let Some(dst) = a.payload.as_bytes_mut() {
            dst[a.filled..a.filled + body.len()].copy_from_slice(body);
        }
        a.filled += body.len();
        if a.filled < total {
            return Ok(Arrival::Partial);
        }
        let a = self.assembling.take().expect("assembling");
        Ok(Arrival::Message {
            tag: a.head.tag,
            call: a.head.call,
            payload: a.payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::{Collective, DType};
    use proptest::prelude::*;

    /// One direction of a simulated queue pair: frames in flight and the
    /// receive slots the receiver has posted.
    struct Wire {
        in_flight: VecDeque<(SendSlot, Vec<u8>)>,
        posted: u32,
    }

    struct Side {
        ch: Channel,
        area: Vec<u8>,
        got: Vec<Arrival>,
    }

    fn side(layout: SlotLayout) -> Side {
        Side {
            ch: Channel::new(layout, 1 << 30),
            area: vec![0; layout.send_area_bytes()],
            got: Vec::new(),
        }
    }

    /// Sends every frame `s` can send now onto `w`.
    fn push(s: &mut Side, w: &mut Wire) -> bool {
        let mut moved = false;
        while let Some((slot, len)) = s.ch.poll_send(&mut s.area) {
            let (off, _) = s.ch.layout.send_slot(slot);
            w.in_flight
                .push_back((slot, s.area[off..off + len].to_vec()));
            moved = true;
        }
        moved
    }

    /// Delivers the oldest frame of `w` to `to` (it must find a posted
    /// receive slot), completing the send at `from`.
    fn deliver(from: &mut Side, w: &mut Wire, to: &mut Side) -> bool {
        let Some((slot, bytes)) = w.in_flight.pop_front() else {
            return false;
        };
        assert!(w.posted > 0, "a frame arrived with no receive slot posted");
        w.posted -= 1;
        from.ch.send_completed(slot);
        let arrival = to.ch.receive(&bytes).unwrap();
        w.posted += 1; // re-posted at once
        if arrival != Arrival::Partial {
            to.got.push(arrival);
        }
        true
    }

    fn layout(slot_bytes: usize, slots: u32) -> SlotLayout {
        SlotLayout {
            slot_bytes,
            slots,
            peers: 1,
        }
    }

    fn call(seq: u64) -> CallId {
        CallId::new(
            seq,
            &algorithms::catalogue_algorithm(Collective::Allreduce, "ring"),
        )
    }

    /// Runs both sides with a schedule of choices until quiet; returns
    /// what each side received.
    fn run(l: SlotLayout, a_msgs: &[Payload], b_msgs: &[Payload], schedule: &[u8]) -> (Side, Side) {
        let (mut a, mut b) = (side(l), side(l));
        let mut ab = Wire {
            in_flight: VecDeque::new(),
            posted: l.recv_slots(),
        };
        let mut ba = Wire {
            in_flight: VecDeque::new(),
            posted: l.recv_slots(),
        };
        for (i, p) in a_msgs.iter().enumerate() {
            a.ch.queue(Tag(i as u64), call(1), p.clone());
        }
        for (i, p) in b_msgs.iter().enumerate() {
            b.ch.queue(Tag(i as u64), call(1), p.clone());
        }
        a.ch.want_bye();
        b.ch.want_bye();
        let mut step = 0usize;
        loop {
            let choice = schedule
                .get(step % schedule.len().max(1))
                .copied()
                .unwrap_or(0)
                % 4;
            step += 1;
            let moved = match choice {
                0 => push(&mut a, &mut ab),
                1 => push(&mut b, &mut ba),
                2 => deliver(&mut a, &mut ab, &mut b),
                _ => deliver(&mut b, &mut ba, &mut a),
            };
            if !moved {
                let any = push(&mut a, &mut ab)
                    | push(&mut b, &mut ba)
                    | deliver(&mut a, &mut ab, &mut b)
                    | deliver(&mut b, &mut ba, &mut a);
                if !any {
                    break;
                }
            }
            assert!(step < 1_000_000, "no livelock");
        }
        (a, b)
    }

    fn messages(got: &[Arrival]) -> Vec<Payload> {
        got.iter()
            .filter_map(|a| match a {
                Arrival::Message { payload, .. } => Some(payload.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn big_messages_are_chunked_and_both_sides_finish() {
        let l = layout(HEADER_BYTES + 16, 2);
        let big = Payload::from_vec((0..1000i32).collect::<Vec<_>>());
        let small = Payload::from_vec(vec![7u8]);
        let empty = Payload::zeros(DType::F32, 0, false);
        let ghost = Payload::phantom(DType::F64, 1 << 20);
        let (a, b) = run(
            l,
            &[big.clone(), small.clone(), empty.clone(), ghost.clone()],
            &[],
            &[0, 2],
        );
        assert_eq!(messages(&b.got), vec![big, small, empty, ghost]);
        assert!(a.ch.finished() && b.ch.finished());
        assert!(a.ch.sends_idle() && b.ch.sends_idle());
        assert_eq!(b.got.last(), Some(&Arrival::Bye));
    }

    #[test]
    fn a_one_way_stream_gets_its_credits_back_by_credit_frames() {
        let l = layout(HEADER_BYTES + 4, 8);
        let big = Payload::from_vec(vec![1i32; 1000]); // 1000 frames
        let (a, b) = run(l, std::slice::from_ref(&big), &[], &[0, 2, 2, 0, 3]);
        assert_eq!(messages(&b.got), vec![big]);
        assert!(a.ch.finished() && b.ch.finished());
        let (lent, owed) = (a.ch.credits().available(), b.ch.credits().owed());
        assert_eq!(lent + owed, 8, "every credit is either back or still owed");
        assert!(
            owed < b.ch.credits().threshold(),
            "only a remainder below a credit frame is owed"
        );
    }

    #[test]
    fn protocol_violations_are_errors_not_panics() {
        let l = layout(HEADER_BYTES + 8, 2);
        let mut ch = Channel::new(l, 100);
        let mut f = vec![0u8; HEADER_BYTES + 4];
        frame::encode_header(&mut f, FrameKind::Data, 0, 4, None);
        assert!(ch.receive(&f).unwrap_err().contains("without a message"));
        let head = MessageHead {
            tag: Tag(1),
            call: call(1),
            shape: algorithms::Shape::new(DType::U8, 200),
            phantom: false,
        };
        let mut f = vec![0u8; HEADER_BYTES];
        frame::encode_header(&mut f, FrameKind::Data, 0, 0, Some(&head));
        let e = Channel::new(l, 100).receive(&f).unwrap_err();
        assert!(e.contains("over the 100-byte limit"), "{e}");
        let e = Channel::new(l, 100).receive(&[1, 2, 3]).unwrap_err();
        assert!(e.contains("malformed frame"), "{e}");
        let mut f = vec![0u8; HEADER_BYTES];
        frame::encode_header(&mut f, FrameKind::Credit, 3, 0, None);
        let e = Channel::new(l, 100).receive(&f).unwrap_err();
        assert!(e.contains("more than this side lent"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any interleaving of two sides sending to each other delivers every
        /// message in order, never lands a frame without a posted receive
        /// slot (asserted in `deliver`), and ends with both sides finished.
        #[test]
        fn any_interleaving_delivers_in_order(
            slots in 1u32..5,
            chunk in 1usize..40,
            a_sizes in proptest::collection::vec(0usize..300, 0..6),
            b_sizes in proptest::collection::vec(0usize..300, 0..6),
            schedule in proptest::collection::vec(any::<u8>(), 1..64),
        ) {
            let l = layout(HEADER_BYTES + chunk, slots);
            let mk = |sizes: &[usize], seed: u8| -> Vec<Payload> {
                sizes.iter().enumerate()
                    .map(|(i, &n)| Payload::from_vec((0..n).map(|k| (k as u8).wrapping_mul(seed).wrapping_add(i as u8)).collect::<Vec<u8>>()))
                    .collect()
            };
            let (am, bm) = (mk(&a_sizes, 3), mk(&b_sizes, 5));
            let (a, b) = run(l, &am, &bm, &schedule);
            prop_assert_eq!(messages(&b.got), am);
            prop_assert_eq!(messages(&a.got), bm);
            prop_assert!(a.ch.finished() && b.ch.finished());
            prop_assert_eq!(a.ch.queued() + b.ch.queued(), 0);
        }
    }
}
