// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA link: bootstrap handshake over scratchpads, then a heartbeat in
 * window memory. The link is up for both faces when both sides have accepted
 * each other's session epoch and the peer's heartbeat keeps moving.
 *
 * Sessions: every side picks a random non-zero epoch when it starts and again
 * after every link loss, and publishes it with the address of its inbox in the
 * peer's scratchpads. A side accepts the peer's epoch after validating what
 * the peer published, and acknowledges it; the link comes up when each side
 * sees its own epoch acknowledged. A reload or reboot of either side changes
 * its epoch, which the other side notices and follows.
 */

#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/moduleparam.h>
#include <linux/random.h>

#include "ntrdma_priv.h"

unsigned int ntrdma_heartbeat_ms = 100;
module_param_named(heartbeat_ms, ntrdma_heartbeat_ms, uint, 0444);
MODULE_PARM_DESC(heartbeat_ms, "Heartbeat period in ms (default 100)");

bool ntrdma_force_windowed;
module_param_named(windowed, ntrdma_force_windowed, bool, 0444);
MODULE_PARM_DESC(windowed,
		 "Windowed mode even where the window could map the peer's RAM at translation 0 (default N; windowed mode is chosen by itself where it cannot)");

unsigned int ntrdma_heartbeat_timeout_ms = 1000;
module_param_named(heartbeat_timeout, ntrdma_heartbeat_timeout_ms, uint, 0444);
MODULE_PARM_DESC(heartbeat_timeout,
		 "Link down after the peer's heartbeat stalls this long, in ms (default 1000)");

static unsigned long ntrdma_hb_period(void)
{
	return msecs_to_jiffies(clamp(ntrdma_heartbeat_ms, 10U, 1000U));
}

static unsigned long ntrdma_hb_timeout(void)
{
	unsigned int t = max(ntrdma_heartbeat_timeout_ms,
			     2 * clamp(ntrdma_heartbeat_ms, 10U, 1000U));

	return msecs_to_jiffies(t);
}

/**
 * ntrdma_link_ended_at() - when the last session ended
 * @ndev: the device
 *
 * Any context. Valid once ntrdma_link_session() no longer returns that
 * session (the time is set before the state changes), even before the
 * faces' link_down callbacks ran.
 *
 * Return: jiffies at the end of the last session (0 before any).
 */
unsigned long ntrdma_link_ended_at(struct ntrdma_dev *ndev)
{
	smp_rmb(); /* pairs with ntrdma_leave_up() */
	return READ_ONCE(ndev->ended_at);
}

/**
 * ntrdma_link_leave_timeout() - how long a live peer may go on in a session
 * @ndev: the device
 *
 * After this side ended a session, the peer notices (our new epoch, or our
 * missing heartbeat) within its heartbeat timeout; twice ours, as both ends
 * run with the same parameters but each checks at its own period.
 *
 * Return: the bound, in jiffies.
 */
unsigned long ntrdma_link_leave_timeout(struct ntrdma_dev *ndev)
{
	return 2 * ntrdma_hb_timeout();
}

/**
 * ntrdma_link_is_up() - whether a session runs
 * @ndev: the device
 *
 * Any context. The faces' link_up callbacks run right after this turns
 * true (a face's own state says when its part runs), their link_down
 * callbacks right after it turns false.
 *
 * Return: true while the handshake is done and the heartbeat alive.
 */
bool ntrdma_link_is_up(struct ntrdma_dev *ndev)
{
	return READ_ONCE(ndev->state) == NTRDMA_LINK_UP;
}

/**
 * ntrdma_link_peer_gone() - may we no longer write into the peer's memory?
 * @ndev: the device
 *
 * Any context; reads our own memory only. Placements into the peer's
 * pages ask before each copy: a peer that ended the session says so in
 * our inbox first thing, and may give those pages back soon after.
 *
 * Return: true when no session runs or the peer told us it left this one.
 */
bool ntrdma_link_peer_gone(struct ntrdma_dev *ndev)
{
	u32 peer = READ_ONCE(ndev->peer_epoch);

	return !ntrdma_link_is_up(ndev) || !peer ||
	       READ_ONCE(ndev->inbox->left) == peer;
}

/**
 * ntrdma_link_session() - which session runs
 * @ndev: the device
 *
 * Any context. Sessions are numbered from 1 as they come up on this side,
 * so a face can tell whether something it did belongs to the session that
 * runs now.
 *
 * Return: the running session's number, 0 when the link is down.
 */
u32 ntrdma_link_session(struct ntrdma_dev *ndev)
{
	return ntrdma_link_is_up(ndev) ? READ_ONCE(ndev->session) : 0;
}

static u32 ntrdma_new_epoch(u32 old)
{
	u32 e;

	do {
		e = get_random_u32();
	} while (!e || e == old);
	return e;
}

/* The link's scratchpads and state (ntrdma_link_ops.h). */
static u32 link_spad(struct ntrdma_dev *ndev, unsigned int idx)
{
	return ndev->link->ops->spad_read(ndev->link, idx);
}

static void link_peer_spad(struct ntrdma_dev *ndev, unsigned int idx, u32 val)
{
	ndev->link->ops->peer_spad_write(ndev->link, idx, val);
}

static bool link_hw_up(struct ntrdma_dev *ndev)
{
	return ndev->link->ops->is_up(ndev->link);
}

static void ntrdma_ring_ctrl(struct ntrdma_dev *ndev)
{
	ndev->link->ops->peer_db_set(ndev->link, NTRDMA_DB_CTRL);
}

/*
 * Publish our session into the peer's scratchpads. The epoch brackets the
 * fields like a sequence count: it is 0 while they change and written after
 * them, so a reader that sees the same epoch before and after reading them
 * has them all from one publication (ntrdma_try_accept). The magic is last.
 */
static void ntrdma_publish(struct ntrdma_dev *ndev)
{
	link_peer_spad(ndev, NTRDMA_SPAD_MAGIC, 0);
	link_peer_spad(ndev, NTRDMA_SPAD_EPOCH, 0);
	wmb(); /* the epoch is void before the fields change */
	link_peer_spad(ndev, NTRDMA_SPAD_VERSION, NTRDMA_VERSION);
	link_peer_spad(ndev, NTRDMA_SPAD_INBOX_LO,
		       lower_32_bits(ndev->inbox_dma));
	link_peer_spad(ndev, NTRDMA_SPAD_INBOX_HI,
		       upper_32_bits(ndev->inbox_dma));
	link_peer_spad(ndev, NTRDMA_SPAD_INBOX_SIZE, ndev->inbox_size);
	wmb(); /* the fields before the epoch that names them */
	link_peer_spad(ndev, NTRDMA_SPAD_EPOCH, ndev->epoch);
	link_peer_spad(ndev, NTRDMA_SPAD_ACK, ndev->peer_epoch);
	wmb(); /* the fields before the magic that validates them */
	link_peer_spad(ndev, NTRDMA_SPAD_MAGIC, NTRDMA_MAGIC);
	ntrdma_ring_ctrl(ndev);
}

/*
 * Withdraw our publication: the peer drops our session at once, and no
 * later instance of the peer's driver finds an inbox address of ours that
 * may be freed by then.
 */
static void ntrdma_withdraw(struct ntrdma_dev *ndev)
{
	link_peer_spad(ndev, NTRDMA_SPAD_MAGIC, 0);
	link_peer_spad(ndev, NTRDMA_SPAD_EPOCH, 0);
	ntrdma_ring_ctrl(ndev);
}

/* Errors of a link that is not up yet; any other refusal is for good. */
static bool ntrdma_trans_err_transient(int rc)
{
	return rc == -ENOLINK || rc == -EAGAIN || rc == -EBUSY;
}

/* Said once, and the link stays down: retrying cannot help. */
static void ntrdma_refuse(struct ntrdma_dev *ndev, int flat_rc, int rc)
{
	ndev->flat_refused = true;
	dev_err(ndev->link->parent,
		"%s: the window cannot map our RAM at translation 0 (%d), and windowed mode cannot run in it (%d): the link stays down until ntrdma is reloaded\n",
		ndev->name, flat_rc, rc);
}

/* The window cannot be flat: windowed mode, for the device's life. */
static int ntrdma_choose_windowed(struct ntrdma_dev *ndev, int flat_rc)
{
	int rc = ntrdma_window_setup(ndev);

	if (!rc)
		rc = ntrdma_window_trans(ndev);
	if (ntrdma_dev_windowed(ndev))
		dev_info(ndev->link->parent,
			 "%s: windowed mode: the window cannot map our RAM at translation 0 (%d): the peer writes only our %zu-byte window buffer; no direct placement\n",
			 ndev->name, flat_rc, ndev->win.size);
	if (rc && !ntrdma_trans_err_transient(rc))
		ntrdma_refuse(ndev, flat_rc, rc);
	return rc;
}

/* Translation 0 over the whole window: flat mode, unless refused. */
static int ntrdma_set_flat_trans(struct ntrdma_dev *ndev)
{
	resource_size_t align, size_align, size_max = 0;
	int rc;

	rc = ndev->link->ops->rx_limits(ndev->link, &align, &size_align,
					&size_max);
	if (!rc && ntrdma_force_windowed && !ndev->mode_chosen)
		return ntrdma_choose_windowed(ndev, -EPERM);
	if (!rc)
		/*
		 * Inbound translation base 0: the peer addresses our memory by
		 * the DMA addresses we give it (identity without an IOMMU,
		 * IOVAs with one).
		 */
		rc = ndev->link->ops->rx_open(ndev->link, NULL, 0, size_max);
	if (!rc && !ndev->mode_chosen)
		ntrdma_rxmem_flat_chosen(ndev);
	if (!rc || ntrdma_trans_err_transient(rc))
		return rc;
	if (!ndev->mode_chosen)
		return ntrdma_choose_windowed(ndev, rc);
	ntrdma_refuse(ndev, rc, rc);
	return rc;
}

/* Open our inbound window for the session we publish next. */
static int ntrdma_set_trans(struct ntrdma_dev *ndev)
{
	int rc;

	if (ntrdma_dev_windowed(ndev))
		rc = ntrdma_window_trans(ndev);
	else
		rc = ntrdma_set_flat_trans(ndev);
	if (!rc)
		ndev->flat_trans = true;
	return rc;
}

/* Heartbeat write: our epoch and counter into the peer's inbox. */
static void ntrdma_hb_send(struct ntrdma_dev *ndev)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(ndev->pinbox);

	if (!pi)
		return;
	ntrdma_peer_w32(ndev, ndev->epoch, &pi->epoch);
	ntrdma_peer_w32(ndev, ++ndev->hb_seq, &pi->hb_seq);
}

/*
 * The heartbeat beats from a timer, not from the link work: faces' session
 * work (buffer allocation under rtnl, say) must not stall it.
 */
static void ntrdma_hb_timer(struct timer_list *t)
{
	struct ntrdma_dev *ndev = from_timer(ndev, t, hb_timer);

	if (!ntrdma_link_is_up(ndev))
		return;
	ntrdma_hb_send(ndev);
	mod_timer(&ndev->hb_timer, jiffies + ntrdma_hb_period());
}

static void ntrdma_go_up(struct ntrdma_dev *ndev)
{
	lockdep_assert_held(&ndev->link_lock);
	atomic_set(&ndev->proto_fault, 0);	/* one of the last session */
	ndev->hb_seen = READ_ONCE(ndev->inbox->hb_seq);
	ndev->hb_seen_at = jiffies;
	ndev->hb_misses = 0;
	ntrdma_vdb_reset(ndev);
	WRITE_ONCE(ndev->session, ndev->session + 1 ?: 1);
	WRITE_ONCE(ndev->state, NTRDMA_LINK_UP);
	ntrdma_hb_send(ndev);
	atomic64_inc(&ndev->stats.link_up_events);
	dev_info(ndev->link->parent, "%s: link up (epoch %08x, peer %08x)\n",
		 ndev->name, ndev->epoch, ndev->peer_epoch);
	mod_timer(&ndev->hb_timer, jiffies + ntrdma_hb_period());
	ntrdma_cmd_start(ndev);
	ntrdma_faces_link(ndev, true);
}

/*
 * Tell the peer in its inbox that we left the session: it stops writing
 * into our memory at its next placement (ntrdma_link_peer_gone()), not only
 * once its link work looks. Its inbox stays its until we withdraw our
 * acknowledgment (ntrdma_publish(), later). Not over a link that is down.
 */
static void ntrdma_tell_left(struct ntrdma_dev *ndev)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(ndev->pinbox);

	if (!pi || !ndev->hw_up)
		return;
	ntrdma_peer_w32(ndev, ndev->epoch, &pi->left);
	wmb(); /* before anything we do about the end */
}

/* If up: down for every face (they stop and flush), logged once. */
static void ntrdma_leave_up(struct ntrdma_dev *ndev, const char *why)
{
	lockdep_assert_held(&ndev->link_lock);
	if (ndev->state != NTRDMA_LINK_UP)
		return;
	ntrdma_tell_left(ndev);
	WRITE_ONCE(ndev->ended_at, jiffies);
	smp_wmb(); /* the end's time before the state that tells of it */
	WRITE_ONCE(ndev->state, NTRDMA_LINK_DOWN);
	del_timer_sync(&ndev->hb_timer);
	atomic64_inc(&ndev->stats.link_down_events);
	dev_info(ndev->link->parent, "%s: link down: %s\n", ndev->name, why);
	ntrdma_faces_link(ndev, false);
	ntrdma_cmd_stop(ndev);
}

/* Leave the session: the faces stop and flush, a new epoch is published. */
static void ntrdma_go_down(struct ntrdma_dev *ndev, const char *why)
{
	ntrdma_leave_up(ndev, why);
	/*
	 * Close the inbound window (on hardware that enforces translation,
	 * a peer that has not noticed yet can no longer write to us); it
	 * reopens when we publish the next session.
	 */
	if (ndev->flat_trans) {
		ndev->link->ops->rx_close(ndev->link);
		ndev->flat_trans = false;
	}
	ndev->epoch = ntrdma_new_epoch(ndev->epoch);
	WRITE_ONCE(ndev->peer_epoch, 0);
	ndev->pinbox = NULL;
	/* The peer cannot write our inbox until it accepts the new epoch. */
	memset(ndev->inbox, 0, ndev->inbox_size);
	if (ndev->hw_up && !ntrdma_set_trans(ndev))
		ntrdma_publish(ndev);
}

/* Validate and accept what the peer published in our scratchpads. */
static void ntrdma_try_accept(struct ntrdma_dev *ndev)
{
	u32 magic, version, epoch, size;
	u64 inbox;
	int rc;

	magic = link_spad(ndev, NTRDMA_SPAD_MAGIC);
	rmb(); /* the magic before the fields it validates */
	epoch = link_spad(ndev, NTRDMA_SPAD_EPOCH);
	rmb(); /* the epoch before the fields it names */
	version = link_spad(ndev, NTRDMA_SPAD_VERSION);
	inbox = link_spad(ndev, NTRDMA_SPAD_INBOX_LO) |
		(u64)link_spad(ndev, NTRDMA_SPAD_INBOX_HI) << 32;
	size = link_spad(ndev, NTRDMA_SPAD_INBOX_SIZE);
	rmb(); /* the fields before the re-check */
	/*
	 * A publication in progress: the fields may mix two of them (a new
	 * epoch with an old inbox address). Look again at the next pass.
	 */
	if (link_spad(ndev, NTRDMA_SPAD_EPOCH) != epoch ||
	    link_spad(ndev, NTRDMA_SPAD_MAGIC) != magic)
		return;

	if (magic != NTRDMA_MAGIC || !epoch || epoch == ndev->peer_epoch)
		return;
	rc = ntrdma_wire_check_boot(magic, version, epoch, inbox, size,
				    ndev->link->map_size);
	if (rc) {
		atomic64_inc(&ndev->stats.proto_errors);
		dev_err_ratelimited(ndev->link->parent,
				    "%s: peer bootstrap rejected (%d): version %u inbox %#llx+%u, window %pa\n",
				    ndev->name, rc, version, inbox, size,
				    &ndev->link->map_size);
		return;
	}
	/*
	 * The peer publishes a new epoch only once it has left its earlier
	 * sessions: what it wrote into our inbox there is done. A peer slow
	 * to see our end wrote into it after our clear at go_down; clear it
	 * again before the acknowledgment lets the peer write for this one.
	 */
	memset(ndev->inbox, 0, ndev->inbox_size);
	WRITE_ONCE(ndev->peer_epoch, epoch);
	ndev->pinbox = (struct ntrdma_inbox __iomem *)(ndev->link->map + inbox);
	ndev->pinbox_off = inbox;
	link_peer_spad(ndev, NTRDMA_SPAD_ACK, epoch);
	ntrdma_ring_ctrl(ndev);
}

/*
 * Up only with the peer that acknowledged our epoch: it published its epoch
 * before it wrote that acknowledgment, so the epoch read after it is that
 * peer's (or a later one's). What we accepted must be that: a publication
 * left behind by a peer that has gone (its driver unloaded without
 * withdrawing, its host died) names an inbox nobody owns any more, and a
 * new peer's acknowledgment must not bring the link up with that address.
 */
static bool ntrdma_peer_acked(struct ntrdma_dev *ndev)
{
	if (!ndev->peer_epoch ||
	    link_spad(ndev, NTRDMA_SPAD_ACK) != ndev->epoch)
		return false;
	rmb(); /* the acknowledgment before the epoch written ahead of it */
	return link_spad(ndev, NTRDMA_SPAD_EPOCH) == ndev->peer_epoch &&
	       link_spad(ndev, NTRDMA_SPAD_MAGIC) == NTRDMA_MAGIC;
}

static void ntrdma_link_work(struct work_struct *work)
{
	struct ntrdma_dev *ndev = container_of(to_delayed_work(work),
					       struct ntrdma_dev, link_work);
	bool hw;
	u32 v;

	mutex_lock(&ndev->link_lock);
	if (ndev->stopping || ndev->flat_refused)
		goto out;
	if (ntrdma_fault_deaf(ndev))
		goto resched;	/* test builds: a peer late to look */

	hw = link_hw_up(ndev);
	if (!hw) {
		if (ndev->hw_up) {
			ndev->hw_up = false;
			ntrdma_go_down(ndev, "the link below it is down");
		}
		goto out;
	}
	if (!ndev->hw_up || !ndev->flat_trans) {
		if (ntrdma_set_trans(ndev))
			goto resched;
		ndev->hw_up = true;
		ntrdma_publish(ndev);
	}

	if (ndev->state != NTRDMA_LINK_UP) {
		if (atomic_read(&ndev->copies_abandoned)) {
			/* ntrdma_place.c: the peer takes a session as proof */
			dev_warn_ratelimited(ndev->link->parent, "%s: DMA copies of the last session still on the channel: no new session yet\n",
					     ndev->name);
			goto resched;
		}
		if (ndev->peer_epoch &&
		    link_spad(ndev, NTRDMA_SPAD_EPOCH) != ndev->peer_epoch) {
			/* The peer withdrew the session we had accepted. */
			WRITE_ONCE(ndev->peer_epoch, 0);
			ndev->pinbox = NULL;
			ntrdma_publish(ndev);
		}
		ntrdma_try_accept(ndev);
		if (ntrdma_peer_acked(ndev))
			ntrdma_go_up(ndev);
		goto resched;
	}

	/*
	 * Up: a protocol error (the peer's, or a copy of ours that failed;
	 * logged with its cause), the peer restarting or no heartbeat?
	 */
	if (atomic_xchg(&ndev->proto_fault, 0)) {
		ntrdma_go_down(ndev, "protocol error");
		goto resched;
	}
	if (READ_ONCE(ndev->inbox->left) == ndev->peer_epoch) {
		ntrdma_go_down(ndev, "the peer left the session");
		goto resched;
	}
	if (link_spad(ndev, NTRDMA_SPAD_EPOCH) != ndev->peer_epoch) {
		ntrdma_go_down(ndev, "peer restarted");
		goto resched;
	}
	/*
	 * Lost: no beat for heartbeat_timeout, seen by enough checks to span
	 * it (a check that itself ran late, after our CPU stalled, sees a long
	 * gap once; that alone is not the peer's silence).
	 */
	v = READ_ONCE(ndev->inbox->hb_seq);
	if (v != ndev->hb_seen) {
		ndev->hb_seen = v;
		ndev->hb_seen_at = jiffies;
		ndev->hb_misses = 0;
	} else if (++ndev->hb_misses >= ntrdma_hb_timeout() / ntrdma_hb_period() &&
		   time_after(jiffies, ndev->hb_seen_at + ntrdma_hb_timeout())) {
		atomic64_inc(&ndev->stats.hb_timeouts);
		ntrdma_go_down(ndev, "peer heartbeat lost");
		goto resched;
	}
	ntrdma_vdb_sweep(ndev);

resched:
	queue_delayed_work(ndev->wq, &ndev->link_work, ntrdma_hb_period());
out:
	mutex_unlock(&ndev->link_lock);
}

/**
 * ntrdma_link_proto_error() - the peer broke the protocol: end the session
 * @ndev: the device
 * @what: what was wrong, for the log
 *
 * Counts it (debugfs proto_errors); the first one of a session is logged
 * and ends the session from the link work: every face goes down and
 * flushes, a new epoch is published and the link comes up again once the
 * peer accepts it.
 * The caller drops what it found malformed, or leaves it and stops polling
 * (never spins on it); its face's link_down follows. Any context.
 */
void ntrdma_link_proto_error(struct ntrdma_dev *ndev, const char *what)
{
	atomic64_inc(&ndev->stats.proto_errors);
	/* Once a session: the first error ends it, the rest are its echo. */
	if (!ntrdma_link_is_up(ndev) || atomic_xchg(&ndev->proto_fault, 1))
		return;
	dev_err(ndev->link->parent, "%s: protocol error: %s: ending the session\n",
		ndev->name, what);
	mod_delayed_work(ndev->wq, &ndev->link_work, 0);
}

/**
 * ntrdma_link_event() - the link below the session changed
 * @ndev: the device
 *
 * Any context (a backend's link event, our control doorbell): the link
 * work looks at the link state at once.
 */
void ntrdma_link_event(struct ntrdma_dev *ndev)
{
	mod_delayed_work(ndev->wq, &ndev->link_work, 0);
	wake_up_all(&ndev->ctrl_wait);
}

int ntrdma_link_init(struct ntrdma_dev *ndev)
{
	mutex_init(&ndev->link_lock);
	init_waitqueue_head(&ndev->ctrl_wait);
	timer_setup(&ndev->hb_timer, ntrdma_hb_timer, 0);
	INIT_DELAYED_WORK(&ndev->link_work, ntrdma_link_work);
	ndev->state = NTRDMA_LINK_DOWN;
	ndev->epoch = ntrdma_new_epoch(0);
	ndev->wq = alloc_ordered_workqueue("%s", WQ_MEM_RECLAIM, ndev->name);
	return ndev->wq ? 0 : -ENOMEM;
}

void ntrdma_link_start(struct ntrdma_dev *ndev)
{
	ndev->link->ops->enable(ndev->link);
	mod_delayed_work(ndev->wq, &ndev->link_work, 0);
}

/* Has the peer left our session (it no longer acknowledges @epoch)? */
static bool ntrdma_peer_left(struct ntrdma_dev *ndev, u32 epoch)
{
	return !link_hw_up(ndev) ||
	       link_spad(ndev, NTRDMA_SPAD_ACK) != epoch;
}

/*
 * Stop for unload: faces down first, then withdraw our session so the peer
 * drops at once, and wait until it has: until then it may still write into
 * our inbox and posted buffers, which must not be freed before. Returns
 * false if the peer still holds our session after the wait (the caller
 * must then keep that memory). Callbacks may still queue the (now idle)
 * link work until the caller has cleared the NTB context;
 * ntrdma_link_fini() then frees the queue.
 */
bool ntrdma_link_stop(struct ntrdma_dev *ndev)
{
	u32 epoch;
	bool left;

	mutex_lock(&ndev->link_lock);
	ndev->stopping = true;
	epoch = ndev->epoch;
	/*
	 * Withdraw first, so the peer drops at once; it may still receive
	 * writes from our faces until they stop below, into memory it keeps.
	 * Also with the NTB link down: a publication of ours left in the
	 * peer's scratchpads would name an inbox we are about to free.
	 */
	ntrdma_withdraw(ndev);
	ntrdma_leave_up(ndev, "unloading");
	ndev->pinbox = NULL;
	mutex_unlock(&ndev->link_lock);

	/* The peer answers a control doorbell within one pass of its work. */
	left = wait_event_timeout(ndev->ctrl_wait,
				  ntrdma_peer_left(ndev, epoch),
				  2 * ntrdma_hb_timeout()) ||
	       ntrdma_peer_left(ndev, epoch);
	if (!left)
		dev_warn(ndev->link->parent,
			 "%s: the peer still holds our session: keeping the memory it may write\n",
			 ndev->name);
	ndev->link->ops->disable(ndev->link);
	return left;
}

void ntrdma_link_fini(struct ntrdma_dev *ndev)
{
	del_timer_sync(&ndev->hb_timer);
	cancel_delayed_work_sync(&ndev->link_work);
	destroy_workqueue(ndev->wq);
}
