package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-tsdb/tessera/placement"
)

func TestParseInstance(t *testing.T) {
	tests := []struct {
		spec    string
		want    placement.Instance
		wantErr string
	}{
		{
			spec: "id=a,group=r1,zone=z1,weight=2,endpoint=10.0.0.1:9000,http=10.0.0.1:7201",
			want: placement.Instance{ID: "a", IsolationGroup: "r1", Zone: "z1", Weight: 2, Endpoint: "10.0.0.1:9000", HTTPEndpoint: "10.0.0.1:7201"},
		},
		{
			spec: "endpoint=h:9000, id=b ,group=r2",
			want: placement.Instance{ID: "b", IsolationGroup: "r2", Weight: 1, Endpoint: "h:9000"},
		},
		{spec: "id=a,grp=r1,endpoint=h:9000", wantErr: `unknown field "grp"`},
		{spec: "id=a,group=r1", wantErr: "missing field endpoint"},
		{spec: "group=r1,endpoint=h:9000", wantErr: "missing field id"},
		{spec: "id=a,endpoint=h:9000", wantErr: "missing field group"},
		{spec: "id=a,group=r1,endpoint=h", wantErr: `field endpoint: "h" is not host:port`},
		{spec: "id=a,group=r1,endpoint=h:0", wantErr: `field endpoint: "h:0" has an invalid port`},
		{spec: "id=a,group=r1,endpoint=h:1,http=x", wantErr: `field http: "x" is not host:port`},
		{spec: "id=a,group=r1,endpoint=h:1,weight=0", wantErr: `field weight: "0" is not a positive integer`},
		{spec: "id=a,group=r1,endpoint=h:1,weight=x", wantErr: `field weight: "x" is not a positive integer`},
		{spec: "id=a,id=b,group=r1,endpoint=h:1", wantErr: `field "id" given twice`},
		{spec: "id=a,group,endpoint=h:1", wantErr: `field "group" is not key=value`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseInstance(tt.spec)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
