/*-------------------------------------------------------------------------
 *
 * zl_follow.h
 *	  What the layers above use of the follow layer: setting it up at
 *	  library load (README "Following a live source").
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZL_FOLLOW_H
#define ZL_FOLLOW_H

extern void zl_follow_init(void);

#endif							/* ZL_FOLLOW_H */
