package lockbench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes the results of one run per lock as one aligned table.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\tgrants/s\twait p50\twait p99\tlongest wait\tcalls/grant\tmost in use\tnever granted\terrors\t")
	for _, r := range rs {
		verdict := "OK"
		if !r.Exclusive() {
			verdict = "TWO IN"
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%s\t%.2f\t%d %s\t%d of %d\t%d\t\n",
			r.Impl, r.PerSec, dur(r.WaitP50), dur(r.WaitP99), dur(r.Longest), r.CallsPerGrant,
			r.MostInUse, verdict, r.NeverGranted, r.Config.Groups*r.Config.Contenders, r.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "  %-15s %s\n", r.Impl, r.Settings)
		if r.Errors > 0 {
			fmt.Fprintf(w, "  %-15s first error: %s\n", "", r.FirstError)
		}
		if r.LeaseEnded > 0 {
			fmt.Fprintf(w, "  %-15s holds that outlived their lease: %d\n", "", r.LeaseEnded)
		}
	}
	return nil
}

// dur prints a wait with three significant figures.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
}
