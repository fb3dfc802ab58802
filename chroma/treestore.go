package chroma

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"golang.org/x/sync/errgroup"
)

// TreeCache keeps stored trees between mounts (the host tier), by the
// SHA-256 of the stored text; Get returns only text of that digest.
type TreeCache interface {
	Get(sha string, size int64) ([]byte, bool)
	Put(sha string, text []byte)
}

// LoadTree returns the stored path tree document (base64 of gzip of JSON,
// or plain JSON), reassembled and verified when it was split into parts.
func (s *Store) LoadTree(ctx context.Context) ([]byte, error) {
	text, _, err := s.LoadTreeCached(ctx, nil)
	return text, err
}

// LoadTreeCached is LoadTree reading a tree stored in parts from tc when
// tc holds the version the header names: one request instead of one per
// 300 parts. Trees it fetches are put in tc. It also returns the tree's
// stamp (see TreeStamp).
//
// The first load of a store opened by name (Open: its host did not
// remember the collection, so its tree is not likely in tc) asks for the
// header and the first parts in one request (treeAtOnce): a cold mount
// waits for one round trip less. Every other load (a store opened by a
// remembered id, a refresh) reads the header first, and the parts from tc
// when it holds them.
func (s *Store) LoadTreeCached(ctx context.Context, tc TreeCache) ([]byte, string, error) {
	if s.atOnce.Swap(false) && s.opened() {
		text, stamp, ok, err := s.treeAtOnce(ctx, tc)
		if err != nil || ok {
			return text, stamp, err
		}
	}
	res, err := s.treeHeader(ctx, v2.IncludeDocuments, v2.IncludeMetadatas)
	if err != nil {
		return nil, "", err
	}
	doc := documentAt(res, 0)
	md := metadataAt(res, 0)
	stamp := stampOf(doc, md)
	if md == nil {
		return []byte(doc), stamp, nil // foreign tree: no manifest to check
	}
	text, err := s.assembleTree(ctx, doc, md, tc)
	return text, stamp, err
}

// TreeStamp names the stored tree's version without loading it: the
// SHA-256 its header records (one small request), or for a tree written
// by another tool, the SHA-256 of its document. A changed stamp means a
// changed tree.
func (s *Store) TreeStamp(ctx context.Context) (string, error) {
	info, err := s.TreeInfo(ctx)
	return info.Stamp, err
}

// KeyIndexGroupsKey, on the header of a tree chromafs-ingest index wrote,
// is the --groups-key it read records' access groups under ("" for none:
// every file public), so that a reader whose key differs knows the
// index's groups are not its own (package view). Trees indexed before it
// was recorded lack it (TreeInfo.IndexGroupsKeyKnown false). Chroma
// accepts an empty string as a metadata value.
const KeyIndexGroupsKey = "chromafs_index_groups_key"

// TreeInfo is what the tree's header tells without loading the tree.
type TreeInfo struct {
	Stamp string // see TreeStamp
	// IndexRecords is the record count the collection had when
	// chromafs-ingest index wrote this tree; -1 for any other tree.
	IndexRecords int
	// IndexGroupsKey is the key of records' access groups the index was
	// written with ("" for none), when IndexGroupsKeyKnown: an index
	// written before it was recorded does not say.
	IndexGroupsKey      string
	IndexGroupsKeyKnown bool
}

// TreeInfo reads the tree's header (one small request; two for a tree
// another tool wrote, whose stamp is the digest of its document).
func (s *Store) TreeInfo(ctx context.Context) (TreeInfo, error) {
	info := TreeInfo{IndexRecords: -1}
	res, err := s.treeHeader(ctx, v2.IncludeMetadatas)
	if err != nil {
		return info, err
	}
	md := metadataAt(res, 0)
	if sha, ok := metadataSHA(md); ok {
		return headerInfo(sha, md), nil
	}
	if res, err = s.treeHeader(ctx, v2.IncludeDocuments, v2.IncludeMetadatas); err != nil {
		return info, err
	}
	info.Stamp = stampOf(documentAt(res, 0), metadataAt(res, 0))
	return info, nil
}

// headerInfo is what the metadata md of a header recording sha tells.
func headerInfo(sha string, md metadata) TreeInfo {
	info := TreeInfo{Stamp: sha, IndexRecords: -1}
	if n, ok := md.GetInt(KeyIndexRecords); ok && n >= 0 {
		info.IndexRecords = int(n)
		info.IndexGroupsKey, info.IndexGroupsKeyKnown = md.GetString(KeyIndexGroupsKey)
	}
	return info
}

func stampOf(doc string, md metadata) string {
	if sha, ok := metadataSHA(md); ok {
		return sha
	}
	return hexSHA(doc)
}

func metadataSHA(md metadata) (string, bool) {
	if md == nil {
		return "", false
	}
	sha, ok := md.GetString(KeyTreeSHA)
	return sha, ok && sha != ""
}

// treeHeader gets the tree header record: through the collection, or by
// the collection's id while it is not opened (OpenByID).
func (s *Store) treeHeader(ctx context.Context, include ...v2.Include) (*records, error) {
	var res *records
	var err error
	if s.opened() {
		res, err = s.get(ctx, v2.WithIDs(TreeID), v2.WithInclude(include...))
	} else { // opened by id: one request, the collection stays unopened
		err = s.call(ctx, func(ctx context.Context) (err error) {
			res, err = s.getRecords(ctx, v2.WithIDs(TreeID), v2.WithInclude(include...))
			return err
		})
	}
	if err != nil {
		return nil, s.explain(err, "load path tree")
	}
	if res.Count() == 0 {
		return nil, fmt.Errorf("collection %q: %w (record %q); run chromafs-ingest first", s.cfg.Collection, ErrNoTree, TreeID)
	}
	return res, nil
}

func (s *Store) assembleTree(ctx context.Context, doc string, md metadata, tc TreeCache) ([]byte, error) {
	sha, hasSHA := md.GetString(KeyTreeSHA)
	parts, hasParts := md.GetInt(KeyTreeParts)
	if !hasParts || parts <= 1 {
		if hasSHA && hexSHA(doc) != sha {
			return nil, fmt.Errorf("%w: tree document does not match its sha256", ErrBadTree)
		}
		return []byte(doc), nil
	}
	if !hasSHA || parts > 1<<20 {
		return nil, fmt.Errorf("%w: header claims %d parts without a valid digest", ErrBadTree, parts)
	}
	if want, hasBytes := md.GetInt(KeyTreeBytes); tc != nil && hasBytes {
		if text, ok := tc.Get(sha, want); ok {
			return text, nil
		}
	}
	text, err := s.loadParts(ctx, sha, make([]string, parts))
	if err != nil {
		return nil, err
	}
	return assembled(text, sha, md, tc)
}

// assembled checks the text reassembled from a tree's parts against its
// header (md: its size, its digest sha) and keeps it in tc (if any).
func assembled(text, sha string, md metadata, tc TreeCache) ([]byte, error) {
	if want, ok := md.GetInt(KeyTreeBytes); ok && int64(len(text)) != want {
		return nil, fmt.Errorf("%w: reassembled %d bytes, header says %d", ErrBadTree, len(text), want)
	}
	if hexSHA(text) != sha {
		return nil, fmt.Errorf("%w: reassembled tree does not match its sha256", ErrBadTree)
	}
	if tc != nil {
		tc.Put(sha, []byte(text))
	}
	return []byte(text), nil
}

// treeAtOnce gets the tree's header and its first parts in one request
// (see LoadTreeCached for when):
// the records that carry KeyTreeParts (the header chromafs-ingest writes)
// or KeyTreePart below TreePartsAtOnce (the first parts of this version, or
// of one a run is replacing: at most 2*TreePartsAtOnce+1 records, within one
// get). A tree of more parts gets the others by id after (loadParts), as
// many requests as the header-first path would have made. ok is false,
// with nothing read that counts, when no header is among them (another
// tool's tree, written without those keys): the caller reads the header
// first. Parts of another digest are left out; what is read is verified
// as the other path verifies it.
func (s *Store) treeAtOnce(ctx context.Context, tc TreeCache) (text []byte, stamp string, ok bool, err error) {
	res, err := s.get(ctx, v2.WithWhere(v2.Or(v2.GteInt(KeyTreeParts, 0), v2.LtInt(KeyTreePart, TreePartsAtOnce))),
		v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas), v2.WithLimit(MaxGet))
	if err != nil {
		return nil, "", false, s.explain(err, "load path tree")
	}
	header := -1
	for i, id := range res.IDs {
		if id == TreeID {
			header = i
			break
		}
	}
	if header < 0 {
		return nil, "", false, nil
	}
	doc, md := documentAt(res, header), metadataAt(res, header)
	stamp = stampOf(doc, md)
	sha, hasSHA := md.GetString(KeyTreeSHA)
	n, hasParts := md.GetInt(KeyTreeParts)
	if !hasParts || n <= 1 || !hasSHA || n > 1<<20 { // the header holds the tree, or is refused as the other path refuses it
		text, err := s.assembleTree(ctx, doc, md, nil)
		return text, stamp, true, err
	}
	parts := make([]string, n)
	for i, id := range res.IDs {
		// a part counts under its own id only, once (loadParts asks for
		// the others by id, and refuses what is not what it asked for)
		if k, ok := partIndex(metadataAt(res, i), sha, int(n)); ok && id == treePartID(sha, k) && parts[k] == "" {
			parts[k] = documentAt(res, i)
		}
	}
	joined, err := s.loadParts(ctx, sha, parts)
	if err != nil {
		return nil, "", true, err
	}
	text, err = assembled(joined, sha, md, tc)
	return text, stamp, true, err
}

// TreePartsAtOnce is how many of a tree's first parts LoadTreeCached
// gets with its header: 64 parts of 15 KiB, a tree of about 10,000 pages
// (80-odd bytes a page, stored) whole in one request.
const TreePartsAtOnce = 64

// loadParts gets the parts of the tree of digest sha that parts (one
// per part, in order) does not hold yet ("": missing), MaxGet a request,
// treeFetchers requests at a time; a request the server refuses for
// back-pressure is asked again by itself (WhileBusy), the others stand.
func (s *Store) loadParts(ctx context.Context, sha string, parts []string) (string, error) {
	n := len(parts)
	var missing []int
	for k, p := range parts {
		if p == "" {
			missing = append(missing, k)
		}
	}
	var mu sync.Mutex // protects parts and got
	got := n - len(missing)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(treeFetchers)
	for start := 0; start < len(missing); start += MaxGet {
		ids := make([]v2.DocumentID, 0, MaxGet)
		for _, k := range missing[start:min(start+MaxGet, len(missing))] {
			ids = append(ids, v2.DocumentID(treePartID(sha, k)))
		}
		g.Go(func() error {
			var res *records
			err := WhileBusy(gctx, func() (err error) { // back-pressure: this batch waits, the others keep theirs
				res, err = s.get(gctx, v2.WithIDs(ids...), v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas))
				if err != nil {
					return s.explain(err, "load path tree parts")
				}
				return nil
			})
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i := 0; i < res.Count(); i++ {
				k, ok := partIndex(metadataAt(res, i), sha, n)
				if !ok || parts[k] != "" {
					return fmt.Errorf("%w: part record %q has a wrong or duplicate index", ErrBadTree, res.IDs[i])
				}
				parts[k] = documentAt(res, i)
				got++
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	if got != n {
		return "", fmt.Errorf("%w: found %d of %d parts", ErrBadTree, got, n)
	}
	return strings.Join(parts, ""), nil
}

// treeFetchers is how many requests for tree parts are in flight at once
// (a 1,000,000-page tree is 18 requests of 300 parts; Chroma Cloud allows
// 10 concurrent reads a collection, and the host budget bounds all).
const treeFetchers = 4

func partIndex(md metadata, sha string, n int) (int, bool) {
	if md == nil {
		return 0, false
	}
	if got, _ := md.GetString(KeyTreeSHA); got != sha {
		return 0, false
	}
	k, ok := md.GetInt(KeyTreePart)
	return int(k), ok && k >= 0 && k < int64(n)
}

// WriteTree stores a path tree document. Parts (when needed) are written
// before the header, under ids that include the digest, so readers see the
// old tree until the header is replaced. The caller deletes stale parts
// (TreeIDs names the current ones).
func (s *Store) WriteTree(ctx context.Context, doc string) error {
	return s.writeTree(ctx, doc)
}

// WriteIndexTree is WriteTree for chromafs-ingest index: the header also
// records how many records the collection holds once it is written
// (records, the tree's included) and the key of records' access groups
// the tree was built with (groupsKey, "" for none; see TreeInfo).
func (s *Store) WriteIndexTree(ctx context.Context, doc string, records int, groupsKey string) error {
	return s.writeTree(ctx, doc, v2.NewIntAttribute(KeyIndexRecords, int64(records)), v2.NewStringAttribute(KeyIndexGroupsKey, groupsKey))
}

func (s *Store) writeTree(ctx context.Context, doc string, extra ...*v2.MetaAttribute) error {
	sha := hexSHA(doc)
	parts := splitString(doc, TreePartSize)
	header := v2.NewDocumentMetadata(append([]*v2.MetaAttribute{
		v2.NewIntAttribute(KeyFormat, FormatVersion),
		v2.NewStringAttribute(KeyTreeSHA, sha),
		v2.NewIntAttribute(KeyTreeParts, int64(len(parts))),
		v2.NewIntAttribute(KeyTreeBytes, int64(len(doc))),
		ownerMark(),
	}, extra...)...)
	// A tree record's embedding is made of a short description: its JSON
	// means nothing to a model, and 15 KiB of it is more tokens than
	// OpenAI takes in one input (8,192).
	if len(parts) == 1 {
		return s.upsert(ctx, []Record{{ID: TreeID, Text: doc, Metadata: header, EmbedText: "chromafs path tree"}})
	}
	recs := make([]Record, len(parts))
	for k, p := range parts {
		recs[k] = Record{ID: treePartID(sha, k), Text: p, Metadata: v2.NewDocumentMetadata(
			v2.NewStringAttribute(KeyTreeSHA, sha), v2.NewIntAttribute(KeyTreePart, int64(k)), ownerMark()),
			EmbedText: fmt.Sprintf("chromafs path tree, part %d of %d", k+1, len(parts))}
	}
	if err := s.Upsert(ctx, recs); err != nil { // MaxWrite records a request
		return err
	}
	manifest := fmt.Sprintf("chromafs path tree in %d parts, sha256 %s", len(parts), sha)
	return s.upsert(ctx, []Record{{ID: TreeID, Text: manifest, Metadata: header, EmbedText: manifest}})
}

// TreeIDs returns the ids of the records that hold the stored tree doc.
func TreeIDs(doc string) []string {
	n := len(splitString(doc, TreePartSize))
	if n == 1 {
		return []string{TreeID}
	}
	ids := []string{TreeID}
	sha := hexSHA(doc)
	for k := 0; k < n; k++ {
		ids = append(ids, treePartID(sha, k))
	}
	return ids
}

func splitString(s string, size int) []string {
	if len(s) <= size {
		return []string{s}
	}
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
