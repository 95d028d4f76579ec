// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA engine: the face table. The module hands the engine its faces once
 * (ntrdma_engine_init()); every device adds them in table order, deletes
 * them in reverse order, and tells them of link changes through the table.
 * The engine knows no face by name.
 */

#include "ntrdma_priv.h"

static const struct ntrdma_face *const *ntrdma_faces;
static unsigned int ntrdma_face_count;

void ntrdma_faces_set(const struct ntrdma_face *const *faces,
		      unsigned int count)
{
	ntrdma_faces = faces;
	ntrdma_face_count = count;
}

static void faces_del_from(struct ntrdma_dev *ndev, int i, bool peer_quiet)
{
	for (; i >= 0; i--) {
		if (!ndev->face_priv[i])
			continue;
		ntrdma_faces[i]->del(ndev->face_priv[i], peer_quiet);
		ndev->face_priv[i] = NULL;
	}
}

/*
 * Add every face; a required face that fails removes the ones before it,
 * an optional one is left out with a warning.
 */
int ntrdma_faces_add(struct ntrdma_dev *ndev)
{
	const struct ntrdma_face *face;
	unsigned int i;
	int rc;

	for (i = 0; i < ntrdma_face_count; i++) {
		face = ntrdma_faces[i];
		rc = face->add(ndev, &ndev->face_priv[i]);
		if (!rc)
			continue;
		ndev->face_priv[i] = NULL;
		if (face->optional) {
			dev_warn(ndev->link->parent, "%s: no %s face: %d\n",
				 ndev->name, face->name, rc);
			continue;
		}
		dev_err(ndev->link->parent, "%s: %s face: %d\n", ndev->name,
			face->name, rc);
		faces_del_from(ndev, (int)i - 1, true);
		return rc;
	}
	return 0;
}

/* Delete every face, the last added first. */
void ntrdma_faces_del(struct ntrdma_dev *ndev, bool peer_quiet)
{
	faces_del_from(ndev, (int)ntrdma_face_count - 1, peer_quiet);
}

/* A session started (@up) or ended: tell every face, in table order. */
void ntrdma_faces_link(struct ntrdma_dev *ndev, bool up)
{
	const struct ntrdma_face *face;
	unsigned int i;

	lockdep_assert_held(&ndev->link_lock);
	for (i = 0; i < ntrdma_face_count; i++) {
		face = ntrdma_faces[i];
		if (!ndev->face_priv[i])
			continue;
		if (up)
			face->link_up(ndev->face_priv[i]);
		else
			face->link_down(ndev->face_priv[i]);
	}
}

/* The faces' lines of debugfs info (the faces stay while it is read). */
void ntrdma_faces_show(struct ntrdma_dev *ndev, struct seq_file *s)
{
	unsigned int i;

	for (i = 0; i < ntrdma_face_count; i++)
		if (ndev->face_priv[i] && ntrdma_faces[i]->show)
			ntrdma_faces[i]->show(ndev->face_priv[i], s);
}

/* Each face's debugfs files, in @ndev's folder @dir. */
void ntrdma_faces_debugfs(struct ntrdma_dev *ndev, struct dentry *dir)
{
	unsigned int i;

	for (i = 0; i < ntrdma_face_count; i++)
		if (ndev->face_priv[i] && ntrdma_faces[i]->debugfs)
			ntrdma_faces[i]->debugfs(ndev->face_priv[i], dir);
}
