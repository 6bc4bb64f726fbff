package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// Chart geometry: the legend sits in a column of its own, right of the
// plot, so that it never hides a line.
const (
	chartWidth  = 18 * vg.Centimeter
	chartHeight = 10 * vg.Centimeter
	legendWidth = 4.6 * vg.Centimeter
)

// palette is colour-blind safe (Okabe-Ito); lanes is always the first.
var palette = []color.Color{
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermilion: lanes
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // purple
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

// series is one line of a chart.
type series struct {
	name   string
	pts    plotter.XYs
	dashed bool
	color  color.Color
}

// chart is a line chart with log2 axes of the given ticks.
type chart struct {
	file, title, xLabel, yLabel string
	xTicks                      []float64
	logY                        bool
	series                      []series
}

// log2Ticks labels the powers of two in [lo, hi].
type powTicks []float64

func (t powTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range t {
		if v >= lo*0.999 && v <= hi*1.001 {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
		}
	}
	return out
}

// yTicks labels 1-2-5 steps on a log axis.
type yTicks struct{}

func (yTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.999 && v <= hi*1.001 {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
			}
		}
	}
	return out
}

// save writes the chart as SVG into dir; it reports false, and writes
// nothing, when the run measured none of its series.
func (c chart) save(dir string) (bool, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = c.xLabel
	p.Y.Label.Text = c.yLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = powTicks(c.xTicks)
	if c.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = yTicks{}
	} else {
		p.Y.Min = 0
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.Padding = vg.Points(3)
	drawn := 0
	for i, s := range c.series {
		if len(s.pts) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return false, fmt.Errorf("%s: %s: %w", c.file, s.name, err)
		}
		col := s.color
		if col == nil {
			col = palette[i%len(palette)]
		}
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(2.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			legend.Add(s.name, l)
		} else {
			p.Add(l, pts)
			legend.Add(s.name, l, pts)
		}
		drawn++
	}
	if drawn == 0 {
		return false, nil
	}
	canvas := vgsvg.New(chartWidth, chartHeight)
	dc := draw.New(canvas)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Draw(draw.Crop(dc, chartWidth-legendWidth+vg.Points(8), 0, 0, -vg.Points(30)))
	f, err := os.Create(filepath.Join(dir, c.file))
	if err != nil {
		return false, err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

// semChart is throughput (M ops/s) against goroutines for one capacity.
func semChart(r *results, capacity string, file string) chart {
	c := chart{
		file:   file,
		title:  fmt.Sprintf("One semaphore, capacity %s: acquire+release throughput", capacity),
		xLabel: "goroutines",
		yLabel: "million acquire+release / s",
		logY:   true,
	}
	gs := map[float64]bool{}
	for i, impl := range semImpls {
		s := series{name: impl, color: palette[i]}
		for _, sc := range r.values("Semaphore/ctx=bg/", "scenario") {
			g, ok := strings.CutPrefix(sc, "cap"+capacity+"-g")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(g)
			if err != nil {
				continue
			}
			if ns, ok := r.median(semName("bg", sc, impl), "ns/op"); ok {
				s.pts = append(s.pts, plotter.XY{X: float64(n), Y: 1e3 / ns})
				gs[float64(n)] = true
			}
		}
		c.series = append(c.series, s)
	}
	for g := range gs {
		c.xTicks = append(c.xTicks, g)
	}
	return c
}

// gatewayChart is the speed-up over the global lane against the number of
// keys, with the ideal line (speed-up = keys).
func gatewayChart(r *results) chart {
	c := chart{
		file:   "bench-gateway-keys.svg",
		title:  "Gateway, 256 goroutines, 50 µs sleeps: speed-up over a global lane",
		xLabel: "keys (threads)",
		yLabel: "speed-up at equal critical-section length",
		logY:   true,
	}
	impls := []struct{ impl, label string }{
		{"lanes", "lanes keyedsem"},
		{"locker", "moby/locker"},
		{"keymutex-1024", "keymutex (1024)"},
		{"global", "global lane"},
	}
	ideal := series{name: "ideal", dashed: true, color: color.Gray{Y: 0x80}}
	for i, im := range impls {
		s := series{name: im.label, color: palette[[]int{0, 1, 2, 6}[i]]}
		for _, k := range r.values("GatewayKeys/", "keys") {
			n, _ := strconv.Atoi(k)
			eq, _, ok := r.speedup(func(impl string) string { return gatewayKeysName(n, impl) }, im.impl)
			if !ok {
				continue
			}
			s.pts = append(s.pts, plotter.XY{X: float64(n), Y: eq})
			if i == 0 {
				ideal.pts = append(ideal.pts, plotter.XY{X: float64(n), Y: float64(n)})
				c.xTicks = append(c.xTicks, float64(n))
			}
		}
		c.series = append(c.series, s)
	}
	c.series = append(c.series, ideal)
	return c
}

// charts renders every chart into dir and returns the files written.
func charts(r *results, dir string) ([]string, error) {
	var files []string
	for _, c := range []chart{
		semChart(r, "8", "bench-semaphore-cap8.svg"),
		semChart(r, "1", "bench-semaphore-cap1.svg"),
		gatewayChart(r),
	} {
		ok, err := c.save(dir)
		if err != nil {
			return files, err
		}
		if ok {
			files = append(files, c.file)
		}
	}
	return files, nil
}
