/* SPDX-License-Identifier: MIT */
/* A progress bar on stderr (progress.h). */
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/size.h"
#include "fusefs/cli/progress.h"

#define PROGRESS_REDRAW_US (100 * 1000)
#define PROGRESS_BAR_MAX 40
#define PROGRESS_BAR_MIN 10

/* Columns of the terminal on stderr, 80 when unknown. */
static int terminal_width(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

void dioloop_progress_begin(struct dioloop_progress *p, const char *label,
			    enum dioloop_progress_unit unit, uint64_t total,
			    bool force)
{
	*p = (struct dioloop_progress){
		.label = label,
		.unit = unit,
		.draw = force || isatty(STDERR_FILENO),
		.total = total,
		.start_us = g_get_monotonic_time(),
	};
	p->width = terminal_width();
}

void dioloop_progress_set_total(struct dioloop_progress *p, uint64_t total)
{
	p->total = total;
}

/* units per second as "12.5 MiB/s" or "3.2k blocks/s" into buf. */
static const char *format_rate(const struct dioloop_progress *p, double rate,
			       char *buf, size_t len)
{
	char size[32];

	if (p->unit == DIOLOOP_PROGRESS_BYTES) {
		snprintf(buf, len, "%s/s",
			 dioloop_format_size((uint64_t)rate, size, sizeof(size)));
	} else if (rate >= 1e6) {
		snprintf(buf, len, "%.1fM blocks/s", rate / 1e6);
	} else if (rate >= 1e3) {
		snprintf(buf, len, "%.1fk blocks/s", rate / 1e3);
	} else {
		snprintf(buf, len, "%.0f blocks/s", rate);
	}
	return buf;
}

/* Seconds as "1:02:03" or "2:03" into buf. */
static const char *format_duration(uint64_t s, char *buf, size_t len)
{
	if (s >= 3600)
		snprintf(buf, len, "%" G_GUINT64_FORMAT ":%02u:%02u", s / 3600,
			 (unsigned)(s / 60 % 60), (unsigned)(s % 60));
	else
		snprintf(buf, len, "%u:%02u", (unsigned)(s / 60),
			 (unsigned)(s % 60));
	return buf;
}

/* Units per second since the start. */
static double progress_rate(const struct dioloop_progress *p, int64_t now)
{
	double secs = (double)(now - p->start_us) / 1e6;

	return secs > 0.0 ? (double)p->done / secs : 0.0;
}

/* Draw the line for p->done (and the ETA unless final). */
static void draw(struct dioloop_progress *p, int64_t now, bool final)
{
	double frac = p->total ? (double)p->done / (double)p->total : 1.0;
	double rate = progress_rate(p, now);
	char rate_s[48], eta[32], tail[128], bar[PROGRESS_BAR_MAX + 1];
	int bar_len, fill, n;

	if (frac > 1.0)
		frac = 1.0;
	format_rate(p, rate, rate_s, sizeof(rate_s));
	if (final)
		format_duration((uint64_t)((now - p->start_us) / 1000000),
				eta, sizeof(eta));
	else if (rate > 0.0 && p->total >= p->done)
		format_duration((uint64_t)((double)(p->total - p->done) / rate),
				eta, sizeof(eta));
	else
		g_strlcpy(eta, "-:--", sizeof(eta));
	snprintf(tail, sizeof(tail), "%6.2f%%  %s  %s %s", frac * 100.0,
		 rate_s, final ? "in" : "ETA", eta);
	bar_len = p->width - 1 - (int)strlen(p->label) - 5 - (int)strlen(tail);
	if (bar_len > PROGRESS_BAR_MAX)
		bar_len = PROGRESS_BAR_MAX;
	if (bar_len < PROGRESS_BAR_MIN)
		bar_len = 0;
	fill = (int)(frac * bar_len);
	memset(bar, '#', fill);
	memset(bar + fill, '.', bar_len - fill);
	bar[bar_len] = '\0';
	if (bar_len)
		n = fprintf(stderr, "\r%s  [%s]  %s", p->label, bar, tail);
	else
		n = fprintf(stderr, "\r%s  %s", p->label, tail);
	/* Wipe what a longer previous line left. */
	if (n - 1 < p->last_len)
		fprintf(stderr, "%*s", p->last_len - (n - 1), "");
	p->last_len = n - 1;
	fflush(stderr);
	p->last_draw_us = now;
}

void dioloop_progress_update(struct dioloop_progress *p, uint64_t done)
{
	int64_t now;

	p->done = done;
	if (!p->draw)
		return;
	now = g_get_monotonic_time();
	if (p->last_draw_us && now - p->last_draw_us < PROGRESS_REDRAW_US)
		return;
	draw(p, now, false);
}

void dioloop_progress_end(struct dioloop_progress *p, bool ok)
{
	int64_t now = g_get_monotonic_time();
	char rate_s[48], amount[48], dur[32], total[32];

	if (p->draw) {
		draw(p, now, ok);
		fputc('\n', stderr);
		return;
	}
	if (p->unit == DIOLOOP_PROGRESS_BYTES)
		dioloop_format_size(p->done, amount, sizeof(amount));
	else
		snprintf(amount, sizeof(amount), "%" G_GUINT64_FORMAT " blocks",
			 p->done);
	snprintf(dur, sizeof(dur), "%.1f s", (double)(now - p->start_us) / 1e6);
	if (ok)
		fprintf(stderr, "%s: %s in %s (%s)\n", p->label, amount, dur,
			format_rate(p, progress_rate(p, now), rate_s,
				    sizeof(rate_s)));
	else if (p->unit == DIOLOOP_PROGRESS_BYTES)
		fprintf(stderr, "%s: stopped after %s of %s, %s\n", p->label,
			amount, dioloop_format_size(p->total, total,
						    sizeof(total)), dur);
	else
		fprintf(stderr, "%s: stopped after %s of %" G_GUINT64_FORMAT
			" blocks, %s\n", p->label, amount, p->total, dur);
}
